"""The review queue: who gets which pair, the expiring locks that keep two reviewers off one
pair, the verbs that end an assignment (judge, skip) and the one that takes a verdict back
while its hold lasts (undo_judgement).

A pair is open to a reviewer while fewer than k reviewers judged it, this reviewer has not
judged or skipped it, and nobody else holds it. Holding is a lock with an end time
(Comparison.locked_by / locked_until): a reviewer who walks away loses the pair once the lock
expires, so the queue never stalls on an abandoned tab.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from datetime import timedelta
from typing import NamedTuple

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from annotation.models import MAX_COMMENT, Assignment, Comparison, ComparisonSet, Judgement
from core.vocabulary import ComparisonChoice, values

logger = logging.getLogger(__name__)

_swap = random.SystemRandom()


class QueueError(ValueError):
    """A queue action that cannot be done (no live assignment, bad choice, ...); nothing was written."""


def _open_to(reviewer: User, cset: ComparisonSet) -> Q:
    now = timezone.now()
    return (
        Q(comparison_set=cset, judgement_count__lt=cset.reviewers_per_pair)
        & (Q(locked_by=None) | Q(locked_until__lte=now) | Q(locked_by=reviewer))
        & (Q(reserved_for=None) | Q(reserved_for=reviewer))
    )


def _finished_by(reviewer: User) -> Q:
    return Q(reviewer=reviewer) & (Q(completed_at__isnull=False) | Q(skipped_at__isnull=False))


def held_by(reviewer: User, cset: ComparisonSet) -> Assignment | None:
    """The pair of this set the reviewer holds now (unexpired, not finished), if any."""
    return (
        Assignment.objects.select_related("comparison")
        .filter(
            reviewer=reviewer,
            comparison__comparison_set=cset,
            comparison__locked_by=reviewer,
            comparison__locked_until__gt=timezone.now(),
            completed_at=None,
            skipped_at=None,
        )
        .first()
    )


@transaction.atomic
def next_for(reviewer: User, cset: ComparisonSet) -> Assignment | None:
    """Assign and lock the reviewer's next pair of the set; the one they already hold, if any.

    None when nothing is left for this reviewer (the queue is done for them).
    """
    held = held_by(reviewer, cset)
    if held is not None:
        return held
    done = Assignment.objects.filter(_finished_by(reviewer)).values("comparison_id")
    # FOR UPDATE SKIP LOCKED (Label Studio's next_task): two reviewers asking at the same moment
    # each lock a different row instead of both reading the same "first open pair"; the row that
    # the other request locked is skipped, not waited for. A row locked and committed just
    # before is re-checked against the filter by PostgreSQL, so its fresh lock excludes it.
    # SQLite has no row locks; there a write transaction serialises requests instead.
    comparison = (
        Comparison.objects.select_for_update(skip_locked=True)
        .filter(_open_to(reviewer, cset))
        .exclude(pk__in=done)
        .order_by("-priority", "position", "id")
        .first()
    )
    if comparison is None:
        return None
    return _assign(reviewer, comparison, cset)


@transaction.atomic
def claim(reviewer: User, comparison: Comparison) -> Assignment:
    """Assign this very pair to the reviewer (a direct link to it), or say why not."""
    cset = comparison.comparison_set
    locked = Comparison.objects.select_for_update().filter(pk=comparison.pk).first()
    if locked is None:
        raise QueueError("this pair no longer exists")
    finished = Assignment.objects.filter(_finished_by(reviewer), comparison=locked).first()
    if finished is not None:
        raise QueueError("you already judged or skipped this pair")
    if locked.locked_by_id == reviewer.pk and locked.locked_until and locked.locked_until > timezone.now():
        assignment = Assignment.objects.filter(comparison=locked, reviewer=reviewer).first()
        if assignment is not None:
            return assignment
    if not Comparison.objects.filter(_open_to(reviewer, cset), pk=locked.pk).exists():
        if locked.judgement_count >= cset.reviewers_per_pair:
            raise QueueError("this pair has all the judgements it needs")
        if locked.reserved_for_id not in (None, reviewer.pk):
            raise QueueError("this pair is reserved for another reviewer")
        raise QueueError("another reviewer holds this pair now")
    return _assign(reviewer, locked, cset)


def _assign(reviewer: User, comparison: Comparison, cset: ComparisonSet) -> Assignment:
    now = timezone.now()
    until = now + timedelta(seconds=cset.lock_seconds)
    Comparison.objects.filter(pk=comparison.pk).update(locked_by=reviewer, locked_until=until)
    comparison.locked_by, comparison.locked_until = reviewer, until
    # A reviewer who comes back to a pair after their lock lapsed keeps the sides they saw.
    assignment, created = Assignment.objects.get_or_create(
        comparison=comparison,
        reviewer=reviewer,
        defaults={"swapped": _swap.random() < 0.5, "expires_at": until},
    )
    if not created:
        Assignment.objects.filter(pk=assignment.pk).update(expires_at=until, assigned_at=now)
        assignment.expires_at, assignment.assigned_at = until, now
    assignment.comparison = comparison
    logger.info("pair %s of set %s assigned to user %s until %s", comparison.pk, cset.name, reviewer.pk, until)
    return assignment


def _live_assignment(reviewer: User, comparison: Comparison) -> tuple[Comparison, Assignment]:
    """The pair, locked for this transaction, and the reviewer's unfinished assignment to it.

    A lock that lapsed still counts while nobody else took the pair: the reviewer who was
    slow is still the only one who holds it, and throwing their work away helps nobody.
    """
    locked = Comparison.objects.select_for_update().select_related("comparison_set").get(pk=comparison.pk)
    assignment = Assignment.objects.filter(comparison=locked, reviewer=reviewer).first()
    if assignment is None:
        raise QueueError("this pair is not assigned to you: ask the queue for your next pair")
    if assignment.completed_at is not None:
        raise QueueError("you already judged this pair")
    if assignment.skipped_at is not None:
        raise QueueError("you skipped this pair")
    if locked.locked_by_id != reviewer.pk:
        raise QueueError("your hold on this pair expired and another reviewer took it")
    return locked, assignment


def to_pair_terms(choice: str, swapped: bool) -> str:
    """A choice as the reviewer saw it (A = the left patch) in the pair's own A/B terms."""
    if swapped and choice in (ComparisonChoice.A, ComparisonChoice.B):
        return ComparisonChoice.B if choice == ComparisonChoice.A else ComparisonChoice.A
    return choice


@transaction.atomic
def judge(
    reviewer: User,
    comparison: Comparison,
    choice: str,
    reason: str,
    tags: Iterable[str] = (),
    *,
    on_screen: bool = True,
) -> Judgement:
    """Record the reviewer's verdict and release the pair.

    With on_screen (the pages and the API), "A" is the patch shown on the left and "B" the one
    on the right; the stored choice is in the pair's A/B terms, whatever sides were shown.
    """
    if choice not in values(ComparisonChoice):
        raise QueueError(f"choice must be one of {', '.join(values(ComparisonChoice))}")
    # Browsers send a textarea's line breaks as CRLF; the reason is kept with plain newlines.
    reason = (reason or "").replace("\r\n", "\n").strip()
    if not reason:
        raise QueueError("say why: a reason is required with every judgement")
    if len(reason) > MAX_COMMENT:
        raise QueueError(f"a reason is at most {MAX_COMMENT} characters")
    tag_list = list(dict.fromkeys(tags))
    unknown = [t for t in tag_list if t not in Judgement.TAGS]
    if unknown:
        raise QueueError(f"unknown tag(s) {', '.join(map(repr, unknown[:5]))}: use {', '.join(Judgement.TAGS)}")
    locked, assignment = _live_assignment(reviewer, comparison)
    if locked.judgement_count >= locked.comparison_set.reviewers_per_pair:
        raise QueueError("this pair has all the judgements it needs")
    now = timezone.now()
    stored = to_pair_terms(choice, assignment.swapped) if on_screen else choice
    judgement = Judgement.objects.create(
        comparison=locked,
        reviewer=reviewer,
        choice=stored,
        reason=reason,
        tags=tag_list,
        swapped=assignment.swapped,
        duration_ms=max(0, int((now - assignment.assigned_at).total_seconds() * 1000)),
    )
    Assignment.objects.filter(pk=assignment.pk).update(completed_at=now)
    Comparison.objects.filter(pk=locked.pk).update(
        judgement_count=F("judgement_count") + 1, locked_by=None, locked_until=None
    )
    logger.info("pair %s judged %s by user %s", locked.pk, stored, reviewer.pk)
    return judgement


def _undo_refusal(reviewer: User, judgement: Judgement, assignment: Assignment | None, locked: Comparison) -> str:
    """Why this judgement cannot be undone now; "" when it can."""
    now = timezone.now()
    if judgement.reviewer_id != reviewer.pk or assignment is None:
        return "only your own verdict can be undone"
    if assignment.expires_at <= now:
        return "your hold on that pair has ended: the verdict stands"
    if locked.locked_by_id not in (None, reviewer.pk) and locked.locked_until and locked.locked_until > now:
        return "another reviewer holds that pair now: the verdict stands"
    return ""


def last_judgement(reviewer: User) -> Judgement | None:
    return Judgement.objects.filter(reviewer=reviewer).order_by("-created_at", "-id").first()


def undoable(reviewer: User, cset: ComparisonSet) -> Judgement | None:
    """The reviewer's last judgement when it is of this set and undo_judgement would take it back."""
    last = last_judgement(reviewer)
    if last is None:
        return None
    comparison = Comparison.objects.filter(pk=last.comparison_id, comparison_set=cset).first()
    if comparison is None:
        return None
    assignment = Assignment.objects.filter(comparison=comparison, reviewer=reviewer).first()
    return None if _undo_refusal(reviewer, last, assignment, comparison) else last


@transaction.atomic
def undo_judgement(reviewer: User, comparison: Comparison) -> Judgement:
    """Take back the reviewer's last verdict, which must be on this pair, and hold the pair again.

    Only while the hold the verdict was given under still runs (the end time the page showed)
    and nobody else holds the pair: past that, others may have been served the pair or its
    verdict read into agreement figures and exports, and a verdict that comes and goes then
    would change what they saw. The reviewer gets the pair back on the sides they judged, until
    the same end time; the deleted verdict is returned (unsaved) so the page can offer it again.
    """
    locked = Comparison.objects.select_for_update().get(pk=comparison.pk)
    last = last_judgement(reviewer)
    if last is None or last.comparison_id != locked.pk:
        raise QueueError("only your last verdict can be undone, and this pair's is not it")
    assignment = Assignment.objects.filter(comparison=locked, reviewer=reviewer).first()
    refusal = _undo_refusal(reviewer, last, assignment, locked)
    if refusal:
        raise QueueError(refusal)
    assert assignment is not None
    last.delete()
    Assignment.objects.filter(pk=assignment.pk).update(completed_at=None)
    Comparison.objects.filter(pk=locked.pk).update(
        judgement_count=F("judgement_count") - 1, locked_by=reviewer, locked_until=assignment.expires_at
    )
    logger.info("verdict on pair %s undone by user %s", locked.pk, reviewer.pk)
    return last


@transaction.atomic
def skip(reviewer: User, comparison: Comparison) -> None:
    """The reviewer passes on this pair for good; it goes back to the queue for others."""
    locked, assignment = _live_assignment(reviewer, comparison)
    Assignment.objects.filter(pk=assignment.pk).update(skipped_at=timezone.now())
    Comparison.objects.filter(pk=locked.pk).update(locked_by=None, locked_until=None)
    logger.info("pair %s skipped by user %s", locked.pk, reviewer.pk)


# --- progress (read only) ----------------------------------------------------------------


def per_hour(count: int, duration_ms: int | None) -> float | None:
    """Judgements per hour of time spent on them (assignment to verdict); None before any."""
    if not count or not duration_ms:
        return None
    return round(count * 3_600_000 / duration_ms, 1)


def set_progress(sets: Iterable[ComparisonSet]) -> dict[int, dict[str, int]]:
    """Per set: pairs, pairs with all k judgements, judgements made and judgements needed."""
    cset_list = list(sets)
    k = {c.pk: c.reviewers_per_pair for c in cset_list}
    out = {pk: {"pairs": 0, "done": 0, "judgements": 0, "needed": 0} for pk in k}
    rows = Comparison.objects.filter(comparison_set__in=k).values_list("comparison_set_id", "judgement_count")
    for set_pk, count in rows.iterator(chunk_size=5000):
        row = out[set_pk]
        row["pairs"] += 1
        row["judgements"] += min(count, k[set_pk])
        row["done"] += count >= k[set_pk]
    for pk, row in out.items():
        row["needed"] = row["pairs"] * k[pk]
    return out


def reviewer_progress(sets: Iterable[ComparisonSet], reviewer: User | None = None) -> list[dict[str, object]]:
    """Per set and reviewer: judgements, skips and throughput; only `reviewer`'s rows when given."""
    pks = [c.pk for c in sets]
    judgements = Judgement.objects.filter(comparison__comparison_set__in=pks)
    skips = Assignment.objects.filter(comparison__comparison_set__in=pks, skipped_at__isnull=False)
    if reviewer is not None:
        judgements, skips = judgements.filter(reviewer=reviewer), skips.filter(reviewer=reviewer)
    skipped = {
        (r["comparison__comparison_set"], r["reviewer__username"]): r["n"]
        for r in skips.values("comparison__comparison_set", "reviewer__username").annotate(n=Count("id"))
    }
    rows = judgements.values("comparison__comparison_set", "reviewer__username").annotate(
        n=Count("id"), spent=Sum("duration_ms")
    )
    out: list[dict[str, object]] = []
    seen = set()
    for r in rows.order_by("comparison__comparison_set", "reviewer__username"):
        key = (r["comparison__comparison_set"], r["reviewer__username"])
        seen.add(key)
        out.append(
            {
                "set": key[0],
                "reviewer": key[1],
                "judged": r["n"],
                "skipped": skipped.get(key, 0),
                "per_hour": per_hour(r["n"], r["spent"]),
            }
        )
    for key, n in skipped.items():
        if key not in seen:
            out.append({"set": key[0], "reviewer": key[1], "judged": 0, "skipped": n, "per_hour": None})
    return out


def remaining_for(reviewer: User, cset: ComparisonSet) -> int:
    """Pairs of the set this reviewer could still be given (held by others now or not)."""
    done = Assignment.objects.filter(_finished_by(reviewer)).values("comparison_id")
    return (
        Comparison.objects.filter(comparison_set=cset, judgement_count__lt=cset.reviewers_per_pair)
        .exclude(pk__in=done)
        .count()
    )


class QueuePosition(NamedTuple):
    """Where a reviewer is in a set: pair `number` of `total` (those finished plus those left)."""

    number: int
    total: int


def queue_position(reviewer: User, cset: ComparisonSet) -> QueuePosition:
    """The pair being looked at counts as left: it is not finished until judged or skipped."""
    finished = Assignment.objects.filter(_finished_by(reviewer), comparison__comparison_set=cset).count()
    return QueuePosition(finished + 1, finished + max(1, remaining_for(reviewer, cset)))
