from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from annotation.models import Assignment, Comparison, Judgement
from annotation.queue import (
    QueueError,
    claim,
    judge,
    next_for,
    queue_position,
    remaining_for,
    reviewer_progress,
    set_progress,
    skip,
    undo_judgement,
    undoable,
)
from tests.annotation.pairs_data import comparison_set
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_reviewers() -> tuple[User, User]:
    return UserFactory.create(username="ann", role="reviewer"), UserFactory.create(username="ben", role="reviewer")


def test_the_queue_serves_pairs_in_order_and_returns_the_held_pair_again(two_reviewers: tuple[User, User]) -> None:
    ann, _ = two_reviewers
    cset = comparison_set(tasks=3)
    first = next_for(ann, cset)
    assert first is not None
    assert first.comparison.position == 0
    again = next_for(ann, cset)
    assert again is not None and again.pk == first.pk and again.swapped == first.swapped
    comparison = Comparison.objects.get(pk=first.comparison_id)
    assert comparison.locked_by == ann
    assert comparison.locked_until is not None and comparison.locked_until > timezone.now()


def test_a_held_pair_goes_to_nobody_else_until_its_lock_expires(two_reviewers: tuple[User, User]) -> None:
    ann, ben = two_reviewers
    cset = comparison_set(tasks=2)
    held = next_for(ann, cset)
    other = next_for(ben, cset)
    assert held is not None and other is not None
    assert held.comparison_id != other.comparison_id
    with pytest.raises(QueueError, match="another reviewer holds"):
        claim(ben, held.comparison)
    Comparison.objects.filter(pk=held.comparison_id).update(locked_until=timezone.now() - timedelta(seconds=1))
    taken = claim(ben, Comparison.objects.get(pk=held.comparison_id))
    assert taken.reviewer == ben
    with pytest.raises(QueueError, match="expired and another reviewer took it"):
        judge(ann, held.comparison, "A", "left is right")


def test_a_slow_reviewer_may_still_judge_when_nobody_took_the_pair(two_reviewers: tuple[User, User]) -> None:
    ann, _ = two_reviewers
    cset = comparison_set(tasks=1)
    held = next_for(ann, cset)
    assert held is not None
    Comparison.objects.filter(pk=held.comparison_id).update(locked_until=timezone.now() - timedelta(minutes=1))
    assert judge(ann, held.comparison, "tie", "both fine").choice == "tie"


@pytest.mark.parametrize(("swapped", "screen", "stored"), [(False, "A", "A"), (True, "A", "B"), (True, "B", "A")])
def test_a_choice_made_on_screen_is_stored_in_the_pairs_own_terms(
    two_reviewers: tuple[User, User], swapped: bool, screen: str, stored: str
) -> None:
    ann, _ = two_reviewers
    cset = comparison_set(tasks=1)
    held = next_for(ann, cset)
    assert held is not None
    Assignment.objects.filter(pk=held.pk).update(swapped=swapped)
    judgement = judge(ann, held.comparison, screen, "  the left one handles empty input  ", ["correct", "minimal"])
    assert (judgement.choice, judgement.swapped) == (stored, swapped)
    assert judgement.reason == "the left one handles empty input"
    assert judgement.tags == ["correct", "minimal"]
    assert judgement.duration_ms is not None
    comparison = Comparison.objects.get(pk=held.comparison_id)
    assert (comparison.judgement_count, comparison.locked_by, comparison.locked_until) == (1, None, None)
    assert Assignment.objects.get(pk=held.pk).completed_at is not None


def test_judging_needs_a_reason_known_tags_a_known_choice_and_an_assignment(
    two_reviewers: tuple[User, User],
) -> None:
    ann, ben = two_reviewers
    cset = comparison_set(tasks=1)
    held = next_for(ann, cset)
    assert held is not None
    for args, message in [
        (("A", "  "), "reason is required"),
        (("left", "why"), "choice must be one of"),
        (("A", "why", ["fast"]), "unknown tag"),
        (("A", "x" * 5001), "at most 5000"),
    ]:
        with pytest.raises(QueueError, match=message):
            judge(ann, held.comparison, *args)  # type: ignore[arg-type]
    with pytest.raises(QueueError, match="not assigned to you"):
        judge(ben, held.comparison, "A", "why")
    assert not Judgement.objects.exists()


def test_nobody_judges_a_pair_twice_and_each_pair_gets_k_different_reviewers(
    two_reviewers: tuple[User, User],
) -> None:
    ann, ben = two_reviewers
    carl = UserFactory.create(username="carl", role="reviewer")
    cset = comparison_set(tasks=2, reviewers=2)
    judged: dict[str, set[int]] = {}
    for user in (ann, ben, carl):
        while (assignment := next_for(user, cset)) is not None:
            judge(user, assignment.comparison, "B", "right is cleaner")
            judged.setdefault(user.username, set()).add(assignment.comparison_id)
    with pytest.raises(QueueError, match="already judged"):
        judge(ann, Comparison.objects.get(pk=min(judged["ann"])), "A", "again")
    assert judged["ann"] == judged["ben"] == set(cset.comparisons.values_list("pk", flat=True))
    assert "carl" not in judged  # two pairs, k = 2: ann and ben took every judgement
    assert list(cset.comparisons.values_list("judgement_count", flat=True)) == [2, 2]
    assert next_for(carl, cset) is None


def test_a_skipped_pair_is_not_served_to_that_reviewer_again_but_goes_to_others(
    two_reviewers: tuple[User, User],
) -> None:
    ann, ben = two_reviewers
    cset = comparison_set(tasks=2)
    first = next_for(ann, cset)
    assert first is not None
    skip(ann, first.comparison)
    second = next_for(ann, cset)
    assert second is not None and second.comparison_id != first.comparison_id
    judge(ann, second.comparison, "A", "fine")
    assert next_for(ann, cset) is None
    assert remaining_for(ann, cset) == 0
    again = next_for(ben, cset)
    assert again is not None and again.comparison_id == first.comparison_id
    with pytest.raises(QueueError, match="you skipped this pair"):
        judge(ann, first.comparison, "A", "changed my mind")


def test_progress_counts_pairs_done_judgements_and_each_reviewers_pace(two_reviewers: tuple[User, User]) -> None:
    ann, ben = two_reviewers
    cset = comparison_set(tasks=3, reviewers=2)
    for user in (ann, ben):
        held = next_for(user, cset)
        assert held is not None
        judge(user, held.comparison, "A", "ok")
    Judgement.objects.update(duration_ms=60_000)  # one minute each
    progress = set_progress([cset])[cset.pk]
    assert progress == {"pairs": 3, "done": 1, "judgements": 2, "needed": 6}
    rows = {r["reviewer"]: r for r in reviewer_progress([cset])}
    assert rows["ann"]["judged"] == rows["ben"]["judged"] == 1
    assert rows["ann"]["per_hour"] == 60.0
    assert [r["reviewer"] for r in reviewer_progress([cset], ann)] == ["ann"]


def test_a_reviewer_takes_back_their_last_verdict_and_holds_the_pair_again(two_reviewers: tuple[User, User]) -> None:
    ann, _ = two_reviewers
    cset = comparison_set(tasks=3)
    first = next_for(ann, cset)
    assert first is not None
    judge(ann, first.comparison, "A", "left is right")
    second = next_for(ann, cset)
    assert second is not None
    assert queue_position(ann, cset) == (2, 3)
    assert undoable(ann, cset) is not None
    undone = undo_judgement(ann, first.comparison)
    assert (undone.choice, undone.reason) == ("B" if first.swapped else "A", "left is right")
    assert not Judgement.objects.exists()
    comparison = Comparison.objects.get(pk=first.comparison_id)
    assert (comparison.judgement_count, comparison.locked_by, comparison.locked_until) == (0, ann, first.expires_at)
    assert Assignment.objects.get(pk=first.pk).completed_at is None
    assert queue_position(ann, cset) == (1, 3)
    assert judge(ann, first.comparison, "tie", "same after all").choice == "tie"
    assert next_for(ann, cset) == second  # the pair held meanwhile is still this reviewer's


def test_only_the_reviewers_own_last_verdict_is_undone_and_only_while_its_hold_lasts(
    two_reviewers: tuple[User, User],
) -> None:
    ann, ben = two_reviewers
    cset = comparison_set(tasks=2, reviewers=2)
    first = next_for(ann, cset)
    assert first is not None
    judge(ann, first.comparison, "A", "left")
    with pytest.raises(QueueError, match="only your last verdict"):
        undo_judgement(ben, first.comparison)
    taken = claim(ben, Comparison.objects.get(pk=first.comparison_id))  # k = 2: ben may take it now
    with pytest.raises(QueueError, match="another reviewer holds that pair now"):
        undo_judgement(ann, first.comparison)
    skip(ben, taken.comparison)
    Assignment.objects.filter(pk=first.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert undoable(ann, cset) is None
    with pytest.raises(QueueError, match="your hold on that pair has ended"):
        undo_judgement(ann, first.comparison)
    Assignment.objects.filter(pk=first.pk).update(expires_at=timezone.now() + timedelta(minutes=5))
    second = next_for(ann, cset)
    assert second is not None
    judge(ann, second.comparison, "B", "right")
    with pytest.raises(QueueError, match="only your last verdict"):
        undo_judgement(ann, first.comparison)  # no longer the last one
    assert Judgement.objects.filter(reviewer=ann).count() == 2
    assert Comparison.objects.get(pk=first.comparison_id).judgement_count == 1
