"""A researcher's bulk actions on a set's pairs: serve some first (priority), keep some for one
reviewer (reservation), or hand reserved pairs back to everyone."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, QuerySet

from annotation.models import Assignment, Comparison, ComparisonSet

MAX_PRIORITY = 100


class BulkError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


def _pairs(cset: ComparisonSet, task: str) -> QuerySet[Comparison]:
    pairs = cset.comparisons.all()
    return pairs.filter(task_ref=task) if task else pairs


def _open(pairs: QuerySet[Comparison]) -> QuerySet[Comparison]:
    return pairs.filter(judgement_count__lt=F("comparison_set__reviewers_per_pair"))


def set_priority(cset: ComparisonSet, priority: int, task: str = "") -> int:
    """Pairs (of `task`, else all) still needing judgements get this priority; how many."""
    if not -MAX_PRIORITY <= priority <= MAX_PRIORITY:
        raise BulkError("priority", f"must be from {-MAX_PRIORITY} to {MAX_PRIORITY}")
    return _open(_pairs(cset, task)).update(priority=priority)


@transaction.atomic
def reserve(cset: ComparisonSet, reviewer: User, count: int, task: str = "") -> int:
    """Up to `count` open pairs nobody holds a reservation on, which the reviewer has not yet judged
    or skipped, in serving order, reserved for them; how many."""
    if count < 1:
        raise BulkError("count", "must be at least 1")
    seen = Assignment.objects.filter(reviewer=reviewer).exclude(completed_at=None, skipped_at=None)
    candidates = (
        _open(_pairs(cset, task))
        .select_for_update(skip_locked=True)
        .filter(reserved_for=None)
        .exclude(pk__in=seen.values("comparison_id"))
        .order_by("-priority", "position", "id")
        .values_list("pk", flat=True)[:count]
    )
    return Comparison.objects.filter(pk__in=list(candidates)).update(reserved_for=reviewer)


def release(cset: ComparisonSet, reviewer: User | None = None) -> int:
    """Reserved pairs (for `reviewer`, else anyone's) served to everyone again; how many."""
    pairs = cset.comparisons.exclude(reserved_for=None)
    return (pairs.filter(reserved_for=reviewer) if reviewer is not None else pairs).update(reserved_for=None)
