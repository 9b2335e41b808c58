"""Trajectories someone asked a person to look at: marked for review, or carrying Crucible's flags
that no reviewer has cleared yet. (The review queue is the pairs reviewers judge: annotation.queue.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet

from annotation.models import ReviewMark, flag_key
from annotation.queries import cleared_flag_keys
from trajectories.models import Trajectory

Show = Literal["all", "marked", "flagged"]
SHOWS: tuple[Show, ...] = ("all", "marked", "flagged")


@dataclass
class MarkedRow:
    trajectory: Trajectory
    marks: list[ReviewMark] = field(default_factory=list)
    open_flags: list[dict[str, object]] = field(default_factory=list)


def marked_trajectories(show: Show) -> QuerySet[Trajectory]:
    """Newest attention first: the last mark's time, else when the trajectory was scored."""
    marked = Exists(ReviewMark.objects.filter(trajectory=OuterRef("pk")))
    flagged = Q(pk__in=open_flagged_pks()) if show != "marked" else Q()
    wanted = {"marked": Q(marked), "flagged": flagged}.get(show, Q(marked) | flagged)
    return (
        Trajectory.objects.filter(wanted)
        .select_related("task__suite")
        .annotate(mark_count=Count("review_marks"), last_mark=Max("review_marks__created_at"))
        .order_by("-last_mark", "-scored_at", "-pk")
        .only(
            "trajectory_id", "task_ref", "task__task_id", "task__suite__name", "final_reward", "success",
            "flags", "scored_at", "status", "policy_kind", "created_at",
        )
    )  # fmt: skip


def open_flagged_pks() -> list[int]:
    """Trajectories with at least one flag no reviewer has cleared.

    Worked out here rather than in SQL: a clearing names flags by a hash of their content
    (annotation.models.flag_key), and flagged trajectories are a small share of all.
    Only Crucible's own flags count; an imported file's claims are not reviewable.
    """
    candidates = list(Trajectory.objects.filter(scored_at__isnull=False).exclude(flags=[]).values_list("pk", "flags"))
    cleared = cleared_flag_keys(pk for pk, _ in candidates)
    return [
        pk
        for pk, flags in candidates
        if any(isinstance(f, dict) and flag_key(f) not in cleared.get(pk, set()) for f in flags)
    ]


def rows(page: list[Trajectory]) -> list[MarkedRow]:
    """Each trajectory with its marks and its flags still open, in two queries for the page."""
    marks: dict[int, list[ReviewMark]] = {}
    for mark in ReviewMark.objects.filter(trajectory__in=page).select_related("author").order_by("-created_at"):
        marks.setdefault(mark.trajectory_id, []).append(mark)
    cleared = cleared_flag_keys(t.pk for t in page)
    result = []
    for trajectory in page:
        open_flags = []
        if trajectory.scored_at is not None:
            done = cleared.get(trajectory.pk, set())
            open_flags = [f for f in trajectory.flags if isinstance(f, dict) and flag_key(f) not in done]
        result.append(MarkedRow(trajectory, marks.get(trajectory.pk, []), open_flags))
    return result
