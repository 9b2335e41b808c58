from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from tasks.models import TaskSuite
from tests.factories import StepFactory, TrajectoryFactory

pytestmark = pytest.mark.django_db


def test_trajectories_are_cursor_paginated_without_gaps_or_repeats(reviewer_client: Client) -> None:
    start = datetime(2025, 6, 1, tzinfo=UTC)
    made = {str(TrajectoryFactory.create(created_at=start + timedelta(minutes=i)).trajectory_id) for i in range(25)}
    seen: list[str] = []
    url: str | None = "/api/v1/trajectories/?page_size=10"
    while url:
        page = reviewer_client.get(url).json()
        assert "count" not in page  # cursor pages never count the table
        seen += [t["trajectory_id"] for t in page["results"]]
        url = page["next"]
    assert len(seen) == 25 and set(seen) == made


def test_trajectories_filter_by_suite_success_reward_and_policy(reviewer_client: Client) -> None:
    good = TrajectoryFactory.create(final_reward=1.0, success=True, policy_kind="hf")
    TrajectoryFactory.create(final_reward=-1.0, success=False, policy_kind="hf")
    TrajectoryFactory.create(final_reward=1.0, success=True, policy_kind="openai")

    def ids(query: str) -> set[str]:
        return {t["trajectory_id"] for t in reviewer_client.get(f"/api/v1/trajectories/?{query}").json()["results"]}

    assert ids("success=true&policy=hf") == {str(good.trajectory_id)}
    assert ids("reward_min=0.5&policy=hf") == {str(good.trajectory_id)}
    assert good.suite is not None
    assert ids(f"suite={good.suite.name}") == {str(good.trajectory_id)}
    assert ids("reward_max=-0.5") == {
        t["trajectory_id"] for t in reviewer_client.get("/api/v1/trajectories/?success=false").json()["results"]
    }
    assert reviewer_client.get("/api/v1/trajectories/?reward_min=lots").status_code == 400


def test_a_trajectory_comes_with_its_steps_in_order(reviewer_client: Client) -> None:
    trajectory = TrajectoryFactory.create()
    for n in (3, 1, 2):
        StepFactory.create(trajectory=trajectory, step=n, action_input={"file": "a.py", "patch": f"p{n}"})
    body = reviewer_client.get(f"/api/v1/trajectories/{trajectory.trajectory_id}/").json()
    assert [s["step"] for s in body["steps"]] == [1, 2, 3]
    assert body["steps"][0]["action_input"] == {"file": "a.py", "patch": "p1"}
    assert body["task_id"] == trajectory.task_ref


def test_tasks_and_suites_are_listed_and_filtered(reviewer_client: Client, demo_suite: TaskSuite) -> None:
    suites = reviewer_client.get("/api/v1/suites/").json()["results"]
    assert suites[0]["name"] == "demo" and suites[0]["task_count"] >= 12
    tasks = reviewer_client.get("/api/v1/tasks/?suite=demo&page_size=100").json()["results"]
    assert len(tasks) == suites[0]["task_count"]
    repo = tasks[0]["repo"]
    filtered = reviewer_client.get(f"/api/v1/tasks/?suite=demo&repo={repo}&page_size=100").json()["results"]
    assert filtered and all(t["repo"] == repo for t in filtered)
    assert reviewer_client.get("/api/v1/tasks/task_0001/").json()["fail_to_pass"]


def test_the_api_is_read_only(reviewer_client: Client, admin_user: object) -> None:
    assert reviewer_client.post("/api/v1/suites/", {"name": "x"}).status_code in (403, 405)
    assert reviewer_client.delete("/api/v1/tasks/task_0001/").status_code in (403, 404, 405)


def test_the_schema_and_docs_are_served(reviewer_client: Client) -> None:
    assert b"/api/v1/trajectories/" in reviewer_client.get("/api/schema/").content
    assert reviewer_client.get("/api/docs/").status_code == 200
