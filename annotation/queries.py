"""Read helpers for labels and marks, shared by the annotation views and the trajectory page.

The trajectory page (a lower layer) never imports these: AnnotationConfig.ready() hands them to
it as a trajectory-page section.
"""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from annotation.models import ReviewMark, StepLabel
from trajectories.models import Trajectory


def labels_prefetch() -> Prefetch:
    """Every step's labels with their authors, in one query per page of steps (not one per step)."""
    return Prefetch("labels", queryset=StepLabel.objects.select_related("author"))


def review_marks(trajectory: Trajectory) -> QuerySet[ReviewMark]:
    return ReviewMark.objects.filter(trajectory=trajectory).select_related("author")
