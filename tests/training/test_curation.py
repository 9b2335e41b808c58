"""Curation into frozen, versioned training sets, and their export."""

from __future__ import annotations

import json
import logging
import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

from tests.conftest import client_for
from tests.factories import TrajectoryFactory
from tests.training.helpers import record_score
from training import curation
from training.curation import CurationError, CurationRule, build_training_set, select
from training.models import TrainingSet
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db


def make(task: str, success: bool, patch: str = "p", reward: float | None = None, **kw: object) -> Trajectory:
    """A trajectory Crucible scored under the current spec (curation only ever sees those)."""
    trajectory = TrajectoryFactory.create(task_ref=task, final_reward=None, success=None, patch=patch, **kw)
    record_score(trajectory, reward if reward is not None else (1.0 if success else 0.0), success)
    return trajectory


def test_curation_keeps_diverse_valid_trajectories_and_mixes_successes_with_failures() -> None:
    for n in range(3):
        make("a", True, patch=f"fix-{n % 2}")  # two distinct solution paths, one repeated
    make("a", False)
    make("b", True)
    for n in range(4):
        make("b", False, patch=f"bad-{n}")
    make("c", False)  # a task whose reward never varies
    make("d", True, duplicate_rate=0.9)
    diverse = select(CurationRule(per_task_limit=2, successes_only=True)).chosen
    assert sorted(t.patch for t in diverse if t.task_ref == "a") == ["fix-0", "fix-1"]
    assert all(t.duplicate_rate <= 0.3 for t in select(CurationRule(max_duplicate_rate=0.3)).chosen)
    assert {t.task_ref for t in select(CurationRule(require_discrimination=True)).chosen} == {"a", "b"}
    mixed = select(CurationRule(size=6, success_ratio=0.5, seed=1)).chosen
    assert len(mixed) == 6 and sum(bool(t.success) for t in mixed) == 3
    failures = [t.task_ref for t in mixed if not t.success]
    assert len(set(failures)) >= 2  # representative failures, not all from one task
    assert select(CurationRule(size=6, success_ratio=0.5, seed=1)).chosen == mixed  # seeded: reproducible
    with pytest.raises(CurationError, match="success ratio"):
        select(CurationRule(success_ratio=2))


def test_a_training_set_is_frozen_versioned_and_exported(researcher: User, reviewer_client: Client) -> None:
    winners = [make("a", True), make("b", True)]
    make("c", False)
    client = client_for(researcher)
    new = reverse("training:set-new")
    assert new == "/training/sets/new/"
    response = client.post(new, {"name": "sft-wins", "query": "success=true&suite="})
    assert response.status_code == 302 and response["Location"] == "/training/sets/sft-wins/1/"
    first = TrainingSet.objects.get(name="sft-wins")
    assert set(first.trajectory_ids) == {str(t.trajectory_id) for t in winners}
    assert first.rule["query"] == {"success": "true"}
    assert first.created_by == researcher
    make("d", True)
    client.post(new, {"name": "sft-wins", "query": "success=true"})
    assert TrainingSet.objects.get(name="sft-wins", version=1).trajectory_ids == first.trajectory_ids  # frozen
    assert len(TrainingSet.objects.get(name="sft-wins", version=2).trajectory_ids) == 3
    export = reviewer_client.get("/training/sets/sft-wins/1/export/")
    assert export["Content-Disposition"] == 'attachment; filename="sft-wins-v1.jsonl"'
    lines = [json.loads(line) for line in b"".join(export.streaming_content).splitlines()]  # type: ignore[attr-defined]
    assert {line["trajectory_id"] for line in lines} == set(first.trajectory_ids)
    assert reviewer_client.post(new, {"name": "x"}).status_code == 403
    assert client.post(new, {"name": "bad name!"}).status_code == 400
    assert client.post(new, {"name": "empty", "query": "task=none"}).status_code == 400
    with pytest.raises(CurationError, match="chose no trajectory"):
        build_training_set("empty", CurationRule(query={"task": "none"}))


def test_training_set_pages_list_and_show_a_set(researcher: User, reviewer_client: Client) -> None:
    winner = make("a", True)
    build_training_set("sft-wins", CurationRule(successes_only=True), researcher)
    listing = reviewer_client.get("/training/sets/").content.decode()
    assert 'href="/training/sets/sft-wins/1/"' in listing
    detail = reviewer_client.get("/training/sets/sft-wins/1/").content.decode()
    assert 'href="/training/sets/sft-wins/1/export/"' in detail and 'href="/training/sets/"' in detail
    assert f'href="/trajectories/{winner.trajectory_id}/"' in detail
    assert reviewer_client.get("/training/sets/sft-wins/2/").status_code == 404
    assert Client().get("/training/sets/").status_code == 302


def test_the_old_training_set_urls_are_gone(reviewer_client: Client) -> None:
    assert reviewer_client.get("/trajectories/training-sets/").status_code == 404


def test_a_version_taken_between_choosing_and_inserting_is_chosen_again(monkeypatch: pytest.MonkeyPatch) -> None:
    make("a", True)
    assert build_training_set("race", CurationRule()).version == 1
    real_next_version = curation._next_version
    stale = iter([1])  # what a writer that chose before the first one committed would see
    monkeypatch.setattr(curation, "_next_version", lambda name: next(stale, None) or real_next_version(name))
    assert build_training_set("race", CurationRule()).version == 2
    assert TrainingSet.objects.filter(name="race").count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_creations_of_one_name_get_versions_one_and_two(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    make("a", True)
    make("b", True)
    caplog.set_level(logging.INFO, logger="training.curation")
    # SQLite's BEGIN IMMEDIATE runs the two transactions one after the other; elsewhere both
    # pick their first version before either inserts, the race that a bare MAX()+1 loses.
    interleave = connection.vendor != "sqlite"
    both_chose = threading.Barrier(2, timeout=30)
    first_choices = iter(range(2))
    choosing = threading.Lock()
    real_next_version = curation._next_version

    def next_version_once_both_chose(name: str) -> int:
        version = real_next_version(name)
        with choosing:
            first_round = next(first_choices, None) is not None
        if interleave and first_round:
            both_chose.wait()
        return version

    monkeypatch.setattr(curation, "_next_version", next_version_once_both_chose)
    versions: list[int] = []
    errors: list[BaseException] = []

    def create() -> None:
        try:
            versions.append(build_training_set("race", CurationRule(successes_only=True)).version)
        except BaseException as exc:  # noqa: BLE001  (reported by the assertion below)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=create) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == [] and sorted(versions) == [1, 2]
    assert sorted(TrainingSet.objects.filter(name="race").values_list("version", flat=True)) == [1, 2]
    if interleave:
        assert any("taken concurrently" in record.getMessage() for record in caplog.records)
