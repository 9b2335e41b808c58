"""Read helpers for training sets, shared by the pages and the export."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import QuerySet

from training.models import TrainingSet
from trajectories.exports import iter_trajectory_lines
from trajectories.models import Trajectory

# The detail page lists this many members; the export always has them all.
PAGE_ROWS = 500
LIST_ROWS = 200


def training_sets() -> QuerySet[TrainingSet]:
    return TrainingSet.objects.all()[:LIST_ROWS]


def member_rows(training_set: TrainingSet) -> QuerySet[Trajectory]:
    return Trajectory.objects.filter(trajectory_id__in=training_set.trajectory_ids[:PAGE_ROWS]).only(
        "trajectory_id", "task_ref", "success", "final_reward", "step_count", "duplicate_rate"
    )


def export_lines(training_set: TrainingSet) -> Iterator[bytes]:
    """The set's trajectories as JSONL, in the trajectory schema, streamed."""
    return iter_trajectory_lines(Trajectory.objects.filter(trajectory_id__in=training_set.trajectory_ids))


def export_filename(training_set: TrainingSet) -> str:
    return f"{training_set.name}-v{training_set.version}.jsonl"
