"""The API does what the pages do: launch and stop batches, draw comparison sets, freeze
training sets, read rewards and verdicts; lists filter and page by cursor."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.models import ComparisonSet
from rewards.models import Reward
from rewards.spec import load_spec
from tests.annotation.pairs_data import suite_with_pairs
from tests.conftest import client_for
from tests.factories import TaskFactory
from tests.webapp.api_world import SPEC, build_world
from training.models import TrainingSet
from trajectories.models import RolloutBatch, Trajectory

pytestmark = pytest.mark.django_db


def post(client: Client, url: str, body: object) -> Any:
    return client.post(url, body, content_type="application/json")


def results(client: Client, url: str) -> list[dict[str, Any]]:
    response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    rows: list[dict[str, Any]] = response.json()["results"]
    return rows


def test_a_batch_is_launched_cancelled_and_resumed_as_on_the_batch_page(researcher: User) -> None:
    world = build_world(researcher)
    other = TaskFactory.create(suite=world.suite, task_id="world_0002", expected_patch="--- a/x\n+++ b/x\n")
    world.task.expected_patch = "--- a/x\n+++ b/x\n"
    world.task.save(update_fields=["expected_patch"])
    client = client_for(researcher)

    created = post(
        client, "/api/v1/batches/", {"suite": "world", "policy": "scripted", "samples": 2, "tasks": [other.task_id]}
    )
    assert created.status_code == 201, created.content
    body = created.json()
    batch = RolloutBatch.objects.get(pk=body["id"])
    assert (batch.policy_kind, batch.samples, batch.created_by) == ("scripted", 2, researcher)
    assert set(batch.trajectories.values_list("task_ref", flat=True)) == {other.task_id}
    assert body["counts"] == {"total": 2, "finished": 0, "failed": 0, "left": 2}
    assert [b["id"] for b in results(client, "/api/v1/batches/?status=queued&suite=world")] == [batch.pk]

    cancelled = post(client, f"/api/v1/batches/{batch.pk}/cancel/", {})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert post(client, f"/api/v1/batches/{batch.pk}/cancel/", {}).status_code == 409
    resumed = post(client, f"/api/v1/batches/{batch.pk}/resume/", {})
    assert resumed.status_code == 200 and resumed.json()["status"] == "queued"
    assert batch.trajectories.filter(status=Trajectory.Status.QUEUED).count() == 2

    # What the page's form refuses, the API refuses, field by field.
    refused = post(client, "/api/v1/batches/", {"suite": "world", "policy": "scripted", "tasks": ["nope"]})
    assert refused.status_code == 400 and "no task 'nope'" in refused.json()["detail"]


def test_a_comparison_set_is_drawn_and_its_verdicts_read_as_a_preference_set(researcher: User) -> None:
    suite = suite_with_pairs(tasks=3, name="api-pairs")
    client = client_for(researcher)
    created = post(client, "/api/v1/comparison-sets/", {"name": "api-set", "suite": suite.name, "strategy": "random"})
    assert created.status_code == 201, created.content
    cset = ComparisonSet.objects.get(name="api-set")
    assert created.json()["progress"]["pairs"] == cset.comparisons.count() == 3
    again = post(client, "/api/v1/comparison-sets/", {"name": "api-set", "suite": suite.name, "strategy": "random"})
    assert again.status_code == 400 and ComparisonSet.objects.filter(name="api-set").count() == 1
    listed = results(client, "/api/v1/comparisons/?set=api-set")
    assert len(listed) == 3 and {row["set"] for row in listed} == {"api-set"}

    world = build_world(researcher)
    summary = client.get("/api/v1/preference-sets/world-pairs/").json()
    assert summary | {"name": "world-pairs"} == {
        "name": "world-pairs",
        "suite": "world",
        "reviewers_per_pair": 1,
        "pairs": 1,
        "with_verdict": 1,
        "preferences": 1,
        "ties": 0,
        "waiting": 0,
    }
    [verdict] = results(client, "/api/v1/preference-sets/world-pairs/pairs/")
    assert verdict["chosen_trajectory_id"] == str(world.good.trajectory_id)
    assert verdict["rejected_trajectory_id"] == str(world.bad.trajectory_id)
    assert verdict["choices"] == ["A"] and verdict["reviewers"] == ["world-reviewer"]
    assert results(client, "/api/v1/judgements/?set=world-pairs&choice=A")[0]["reason"] == "passes"
    assert results(client, "/api/v1/preference-sets/api-set/pairs/") == []  # nobody judged yet


def test_a_training_set_is_frozen_from_a_filter_and_a_rule(researcher: User) -> None:
    world = build_world(researcher)
    spec = load_spec().version
    for trajectory in (world.good, world.bad):
        Reward.objects.create(
            trajectory=trajectory,
            spec_version=spec,
            reward=trajectory.final_reward or 0.0,
            resolved=bool(trajectory.success),
            pass_rate=1.0,
        )
    client = client_for(researcher)
    rule = {"name": "api-sft", "filter": {"suite": "world"}, "successes_only": True}
    first = post(client, "/api/v1/training-sets/", rule)
    assert first.status_code == 201, first.content
    body = first.json()
    assert body["trajectory_ids"] == [str(world.good.trajectory_id)] and body["version"] == 1
    assert body["spec_version"] == spec and body["members"][0]["reward"] == 1.0
    assert post(client, "/api/v1/training-sets/", rule).json()["version"] == 2  # frozen: a new version each time
    assert TrainingSet.objects.get(name="api-sft", version=1).trajectory_ids == [str(world.good.trajectory_id)]
    assert [s["version"] for s in results(client, "/api/v1/training-sets/?name=api-sft")] == [2, 1]

    bad = post(client, "/api/v1/training-sets/", {"name": "x", "filter": {"rm -rf": "1"}})
    assert bad.status_code == 400 and "filter" in bad.json()["errors"]
    empty = post(client, "/api/v1/training-sets/", {"name": "none", "filter": {"suite": "no-such-suite"}})
    assert empty.status_code == 400 and "chose no trajectory" in empty.json()["detail"]
    assert not TrainingSet.objects.filter(name__in=["x", "none"]).exists()


def test_rewards_are_read_per_trajectory_and_per_spec(reviewer: User) -> None:
    world = build_world()
    client = client_for(reviewer)
    mine = results(client, f"/api/v1/rewards/?trajectory={world.good.trajectory_id}")
    assert [(r["spec_version"], r["reward"], r["trajectory"]) for r in mine] == [
        (SPEC, 1.0, str(world.good.trajectory_id))
    ]
    assert {r["task_id"] for r in results(client, f"/api/v1/rewards/?spec={SPEC}&resolved=false")} == {"world_0001"}
    assert results(client, "/api/v1/rewards/?spec=another@1") == []


def test_a_task_shows_its_validation_report(reviewer: User) -> None:
    world = build_world()
    world.task.validation_report = {"runs": 3, "fail_to_pass": {"before": "failed", "after": "passed"}}
    world.task.save(update_fields=["validation_report"])
    body = client_for(reviewer).get("/api/v1/tasks/world_0001/validation/").json()
    assert body == {
        "task_id": "world_0001",
        "version": world.task.version,
        "validation_status": "valid",
        "validation_report": world.task.validation_report,
    }


def test_lists_filter_by_creation_time_in_any_offset(reviewer: User) -> None:
    world = build_world()
    client = client_for(reviewer)
    # 09:00 UTC is 05:00 at -04:00 and 05:00 the next day at +20:00, an offset PostgreSQL refuses.
    early = results(client, "/api/v1/trajectories/?created_before=2026-11-03T05:00:30%2B20:00")
    assert [t["trajectory_id"] for t in early] == [str(world.good.trajectory_id)]
    assert (
        results(client, "/api/v1/trajectories/?created_after=2026-11-02T05:00:30-04:00")[0]["task_id"] == "world_0001"
    )
    assert len(results(client, "/api/v1/rewards/?created_after=2000-01-01T00:00:00%2B20:00")) == 2
    assert client.get("/api/v1/tasks/?created_after=0001-01-01T00:00:00%2B15:00").status_code == 400


def test_steps_are_paged_after_a_number_even_one_beyond_the_column(reviewer: User) -> None:
    world = build_world()
    client = client_for(reviewer)
    url = f"/api/v1/trajectories/{world.good.trajectory_id}/steps/"
    assert [s["step"] for s in client.get(url, {"after": 1}).json()["steps"]] == [2]
    assert client.get(url, {"after": 10**20}).json()["steps"] == []  # past 64 bits: SQLite could not bind it
    assert client.get(url, {"after": "x"}).status_code == 400
