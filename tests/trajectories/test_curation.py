"""Search, saved filters and curation into frozen, versioned training sets."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.conftest import client_for
from tests.factories import StepFactory, TrajectoryFactory
from trajectories.curation import CurationError, CurationRule, build_training_set, select
from trajectories.models import SavedFilter, TrainingSet, Trajectory, duplicate_rate

pytestmark = pytest.mark.django_db


def make(task: str, success: bool, patch: str = "p", reward: float | None = None, **kw: object) -> Trajectory:
    return TrajectoryFactory.create(task_ref=task, success=success, final_reward=reward if reward is not None
                                    else (1.0 if success else 0.0), patch=patch, **kw)


def ids(client: Client, query: str) -> set[str]:
    return {t["trajectory_id"] for t in client.get(f"/api/v1/trajectories/?{query}").json()["results"]}


def test_filters_cover_flags_length_duplicates_and_text(reviewer_client: Client) -> None:
    flagged = make("t1", False, flags=[{"detector": "eq_override", "evidence": "x"}], step_count=30)
    clean = make("t1", True, step_count=4, duplicate_rate=0.5)
    StepFactory.create(trajectory=clean, observation="Traceback: KeyError 'colour'")
    assert ids(reviewer_client, "flag=eq_override") == {str(flagged.trajectory_id)}
    assert ids(reviewer_client, "min_steps=10") == {str(flagged.trajectory_id)}
    assert ids(reviewer_client, "max_duplicate_rate=0.2") == {str(flagged.trajectory_id)}
    assert ids(reviewer_client, "q=colour") == {str(clean.trajectory_id)}
    assert ids(reviewer_client, "q=nothing-like-this") == set()


def test_the_duplicate_rate_counts_repeated_actions() -> None:
    assert duplicate_rate([("run_tests", "pytest"), ("run_tests", "pytest"), ("read_file", "a.py"),
                           ("run_tests", "pytest")]) == 0.5
    assert duplicate_rate([]) == 0.0


def test_a_saved_filter_comes_back_for_its_owner(reviewer_client: Client) -> None:
    response = reviewer_client.post("/trajectories/filters/", {"name": "hacks", "query": "flag=eq_override"})
    assert response.status_code == 302
    html = reviewer_client.get("/trajectories/").content.decode()
    assert '<a href="?flag=eq_override">hacks</a>' in html
    assert reviewer_client.post("/trajectories/filters/", {"name": "", "query": "x=1"}).status_code == 400
    assert SavedFilter.objects.count() == 1


def test_curation_keeps_diverse_valid_trajectories_and_mixes_successes_with_failures() -> None:
    for n in range(3):
        make("a", True, patch=f"fix-{n % 2}")  # two distinct solution paths, one repeated
    make("a", False)
    make("b", True)
    for n in range(4):
        make("b", False, patch=f"bad-{n}")
    make("c", False)  # a task whose reward never varies
    make("d", True, duplicate_rate=0.9)
    diverse = select(CurationRule(per_task_limit=2, successes_only=True))
    assert sorted(t.patch for t in diverse if t.task_ref == "a") == ["fix-0", "fix-1"]
    assert all(t.duplicate_rate <= 0.3 for t in select(CurationRule(max_duplicate_rate=0.3)))
    assert {t.task_ref for t in select(CurationRule(require_discrimination=True))} == {"a", "b"}
    mixed = select(CurationRule(size=6, success_ratio=0.5, seed=1))
    assert len(mixed) == 6 and sum(bool(t.success) for t in mixed) == 3
    failures = [t.task_ref for t in mixed if not t.success]
    assert len(set(failures)) >= 2  # representative failures, not all from one task
    assert select(CurationRule(size=6, success_ratio=0.5, seed=1)) == mixed  # seeded: reproducible
    with pytest.raises(CurationError, match="success ratio"):
        select(CurationRule(success_ratio=2))


def test_a_training_set_is_frozen_versioned_and_exported(researcher: object, reviewer_client: Client) -> None:
    winners = [make("a", True), make("b", True)]
    make("c", False)
    client = client_for(researcher)  # type: ignore[arg-type]
    response = client.post("/trajectories/training-sets/new/", {"name": "sft-wins", "query": "success=true&suite="})
    assert response.status_code == 302 and response["Location"] == "/trajectories/training-sets/sft-wins/1/"
    first = TrainingSet.objects.get(name="sft-wins")
    assert set(first.trajectory_ids) == {str(t.trajectory_id) for t in winners}
    assert first.rule["query"] == {"success": "true"}
    make("d", True)
    client.post("/trajectories/training-sets/new/", {"name": "sft-wins", "query": "success=true"})
    assert TrainingSet.objects.get(name="sft-wins", version=1).trajectory_ids == first.trajectory_ids  # frozen
    assert len(TrainingSet.objects.get(name="sft-wins", version=2).trajectory_ids) == 3
    export = reviewer_client.get("/trajectories/training-sets/sft-wins/1/export/")
    lines = [json.loads(line) for line in b"".join(export.streaming_content).splitlines()]  # type: ignore[attr-defined]
    assert {line["trajectory_id"] for line in lines} == set(first.trajectory_ids)
    assert reviewer_client.post("/trajectories/training-sets/new/", {"name": "x"}).status_code == 403
    assert client.post("/trajectories/training-sets/new/", {"name": "bad name!"}).status_code == 400
    assert client.post("/trajectories/training-sets/new/", {"name": "empty", "query": "task=none"}).status_code == 400
    with pytest.raises(CurationError, match="chose no trajectory"):
        build_training_set("empty", CurationRule(query={"task": "none"}))
