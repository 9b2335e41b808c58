from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from trajectories.models import Step, Trajectory


class AnnotationConfig(AppConfig):
    name = "annotation"

    def ready(self) -> None:
        # Imported here, not at the top: models are not ready while app configs load.
        from annotation.queries import flag_review, labels_prefetch, review_marks
        from trajectories.sections import Slot, TrajectorySection, register_trajectory_section

        def load(trajectory: Trajectory) -> dict[str, Any]:
            return {"review_marks": review_marks(trajectory)}

        def with_labels(steps: QuerySet[Step]) -> QuerySet[Step]:
            return steps.prefetch_related(labels_prefetch())

        register_trajectory_section(
            TrajectorySection(
                key="annotation",
                templates={Slot.SUMMARY: "annotation/_review_marks.html", Slot.STEP: "annotation/_step_labels.html"},
                load=load,
                steps=with_labels,
            )
        )
        # The trajectory's own flags and their clearings: review flags keep it out of training sets.
        register_trajectory_section(
            TrajectorySection(
                key="flag_clearances", templates={Slot.SUMMARY: "annotation/_flag_clearances.html"}, load=flag_review
            )
        )
