"""Reviewers asking for work at the same moment, as real concurrent requests.

Each thread is one reviewer with its own test client and its own database connection (Django
connections are per thread). On PostgreSQL (CI sets DATABASE_URL) the requests really overlap
and the queue's SELECT ... FOR UPDATE SKIP LOCKED is what keeps them apart; SQLite has no row
locks and allows one writer at a time, so there the requests are serialised by the test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from annotation.models import Comparison, Judgement
from tests.annotation.pairs_data import comparison_set
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

REVIEWERS = 8
ROUNDS = 3


def all_at_once(clients: list[Client], request: Callable[[int, Client], Any]) -> list[Any]:
    """Run request(i, client) in one thread per client, released together by a barrier."""
    barrier = threading.Barrier(len(clients))
    serial: AbstractContextManager[Any] = threading.Lock() if connection.vendor == "sqlite" else nullcontext()
    results: list[Any] = [None] * len(clients)
    errors: list[BaseException] = []

    def run(i: int, client: Client) -> None:
        try:
            barrier.wait(timeout=30)
            with serial:
                results[i] = request(i, client)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if errors:
        raise errors[0]
    return results


def test_reviewers_asking_at_the_same_moment_never_get_the_same_pair() -> None:
    cset = comparison_set(name="race", tasks=REVIEWERS * ROUNDS, lock_seconds=600)
    clients = []
    for i in range(REVIEWERS):
        client = Client()
        client.force_login(UserFactory.create(username=f"racer{i}", role="reviewer"))
        clients.append(client)

    def take(i: int, client: Client) -> int:
        response = client.get("/api/v1/comparisons/next/", {"set": "race"})
        assert response.status_code == 200, response.content
        return int(response.json()["id"])

    def judge_and_take(i: int, client: Client) -> int:
        held = take(i, client)  # the same pair again: it is still held by this reviewer
        answer = client.post(
            f"/api/v1/comparisons/{held}/judgements/",
            {"choice": "A", "reason": f"racer {i} prefers the left one"},
            content_type="application/json",
        )
        assert answer.status_code == 201, answer.content
        return take(i, client)

    seen: set[int] = set()
    held = all_at_once(clients, take)
    for round_number in range(ROUNDS):
        assert len(set(held)) == REVIEWERS, f"round {round_number}: two reviewers got the same pair: {held}"
        assert not seen & set(held), "a pair judged already was handed out again"
        locks = dict(Comparison.objects.filter(pk__in=held).values_list("pk", "locked_by__username"))
        assert locks == {pk: f"racer{i}" for i, pk in enumerate(held)}
        seen |= set(held)
        if round_number < ROUNDS - 1:
            held = all_at_once(clients, judge_and_take)
    assert Judgement.objects.count() == REVIEWERS * (ROUNDS - 1)
    assert Comparison.objects.filter(comparison_set=cset, judgement_count__gt=1).count() == 0
