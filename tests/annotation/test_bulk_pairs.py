"""Bulk actions on a set's pairs: priority decides what is served first; a reservation keeps pairs for
one reviewer until released; bad input is refused in the set's page, writing nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from annotation.models import Comparison
from annotation.queue import QueueError, claim, next_for
from tests.annotation.agreement_fixtures import Pair, make_set, reviewers
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def pairs_set() -> tuple[list[Comparison], dict[str, User]]:
    cset = make_set("bulk", [Pair({}) for _ in range(4)], k=1)
    return list(cset.comparisons.order_by("position")), reviewers("ann", "ben")


def post(user: User, data: dict[str, object]) -> tuple[int, str]:
    response = client_for(user).post("/annotation/sets/bulk/bulk/", data, follow=True)
    return response.status_code, response.content.decode()


def test_raised_pairs_are_served_first(researcher: User) -> None:
    pairs, people = pairs_set()
    status, page = post(researcher, {"action": "priority", "task": pairs[2].task_ref, "priority": 50})
    assert status == 200 and "1 open pairs now have priority 50" in page
    first = next_for(people["ann"], pairs[0].comparison_set)
    assert first is not None and first.comparison.pk == pairs[2].pk  # not position 0


def test_reserved_pairs_go_to_their_reviewer_alone_until_released(researcher: User) -> None:
    pairs, people = pairs_set()
    status, page = post(researcher, {"action": "reserve", "reviewer": "ben", "count": 2})
    assert status == 200 and "2 pairs reserved for ben" in page
    reserved = set(Comparison.objects.filter(reserved_for=people["ben"]).values_list("pk", flat=True))
    assert reserved == {pairs[0].pk, pairs[1].pk}  # in serving order
    cset = pairs[0].comparison_set
    ann_first = next_for(people["ann"], cset)
    assert ann_first is not None and ann_first.comparison.pk == pairs[2].pk
    with pytest.raises(QueueError, match="reserved for another reviewer"):
        claim(people["ann"], pairs[0])
    ben_first = next_for(people["ben"], cset)
    assert ben_first is not None and ben_first.comparison.pk == pairs[0].pk

    status, page = post(researcher, {"action": "release", "reviewer": "ben"})
    assert "2 reserved pairs released" in page and not Comparison.objects.exclude(reserved_for=None).exists()


def test_bad_bulk_input_is_refused_in_the_page_and_writes_nothing(researcher: User) -> None:
    pairs, people = pairs_set()
    cases: list[tuple[dict[str, object], str]] = [
        ({"action": "reserve", "count": 2}, "give the reviewer&#x27;s username"),
        ({"action": "reserve", "reviewer": "nobody", "count": 2}, "no user &#x27;nobody&#x27;"),
        ({"action": "priority", "priority": 1000}, "less than or equal to 100"),
        ({"action": "explode"}, "Select a valid choice"),
    ]
    for data, message in cases:
        status, page = post(researcher, data)
        assert status == 400 and message in page and 'id="bulk"' in page, (data, page[-1500:])
    assert not Comparison.objects.exclude(reserved_for=None).exists()
    assert set(Comparison.objects.values_list("priority", flat=True)) == {0}
    assert client_for(people["ann"]).post("/annotation/sets/bulk/bulk/", {"action": "release"}).status_code == 403
