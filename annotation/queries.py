"""Read helpers for labels, marks and flag clearings, shared by the annotation views, the
trajectory page and curation.

The trajectory page (a lower layer) never imports these: AnnotationConfig.ready() hands them to
it as a trajectory-page section.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Prefetch, QuerySet

from annotation.models import FlagClearance, ReviewMark, StepLabel, flag_key
from trajectories.models import Trajectory


def labels_prefetch() -> Prefetch:
    """Every step's labels with their authors, in one query per page of steps (not one per step)."""
    return Prefetch("labels", queryset=StepLabel.objects.select_related("author"))


def review_marks(trajectory: Trajectory) -> QuerySet[ReviewMark]:
    return ReviewMark.objects.filter(trajectory=trajectory).select_related("author")


def flag_review(trajectory: Trajectory) -> dict[str, Any]:
    """The trajectory's own flags, each with its key and whether a reviewer cleared it, and the clearings."""
    clearances = list(FlagClearance.objects.filter(trajectory=trajectory).select_related("reviewer"))
    cleared = set().union(*(c.flag_keys() for c in clearances))
    flags = [
        {"key": key, "flag": flag, "cleared": key in cleared}
        for flag in trajectory.flags
        if isinstance(flag, dict)
        for key in (flag_key(flag),)
    ]
    return {
        "flag_clearances": clearances,
        "reviewable_flags": flags,
        # Only Crucible's own flags can be cleared (annotation.services.clear_flags).
        "flags_to_clear": [f for f in flags if not f["cleared"]] if trajectory.scored_at is not None else [],
    }


CLEARED_CHUNK = 500


def cleared_flag_keys(trajectory_pks: Iterable[int]) -> dict[int, set[str]]:
    """For each trajectory, the keys (annotation.models.flag_key) of every flag a reviewer cleared."""
    pks = sorted(set(trajectory_pks))
    cleared: dict[int, set[str]] = {}
    # In chunks: SQLite bounds the number of parameters of one query.
    for start in range(0, len(pks), CLEARED_CHUNK):
        rows = FlagClearance.objects.filter(trajectory_id__in=pks[start : start + CLEARED_CHUNK])
        for trajectory_id, flags in rows.values_list("trajectory_id", "flags"):
            cleared.setdefault(trajectory_id, set()).update(flag_key(f) for f in flags)
    return cleared
