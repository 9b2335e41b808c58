"""Why a rollout failed is recorded with its log tail and shown where people look."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from trajectories.batches import start_batch
from trajectories.models import RolloutBatch, Trajectory
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script>"


def batch_of_two(**broken: object) -> RolloutBatch:
    for task_id in ("task_0001", "task_0008"):
        import_task_dirs(DEMO / "tasks" / task_id, "failing")
    batch = start_batch(TaskSuite.objects.get(name="failing"), RolloutSettings("scripted"), enqueue=False)
    RolloutBatch.objects.filter(pk=batch.pk).update(**broken)
    return batch


def run_all(batch: RolloutBatch) -> list[Trajectory]:
    return [t for t in (run_trajectory(pk) for pk in batch.trajectories.values_list("pk", flat=True)) if t]


def test_a_missing_sandbox_backend_fails_the_rollout_with_the_reason_and_the_batch_with_it() -> None:
    batch = batch_of_two(sandbox="nosuch")
    for trajectory in run_all(batch):
        assert trajectory.status == "failed"
        first, _, tail = trajectory.error.partition("\n\nlog tail:\n")
        assert first == "the sandbox could not start: unknown sandbox backend 'nosuch' (bwrap, docker, local)"
        assert "SandboxError" in tail and len(tail) <= 3000
    batch.refresh_from_db()
    assert batch.status == "failed"


def test_a_model_server_that_is_not_there_fails_the_rollout_not_finishes_it() -> None:
    batch = batch_of_two(policy_kind="openai", model="m", base_url="http://127.0.0.1:9/v1")
    trajectories = run_all(batch)
    assert len(trajectories) == 2
    for trajectory in trajectories:
        # Not an outcome of the agent's: failed (to show, and to run again on resume), never scored.
        assert trajectory.status == "failed" and trajectory.scored_at is None
        assert "127.0.0.1:9" in trajectory.error


def test_the_batch_page_lists_distinct_errors_with_counts_and_each_rows_error(reviewer_client: Client) -> None:
    batch = batch_of_two()
    first, second = batch.trajectories.order_by("id")
    Trajectory.objects.filter(pk=first.pk).update(status="failed", error=f"model {HOSTILE} gone\n\nlog tail:\nTrace")
    Trajectory.objects.filter(pk=second.pk).update(status="failed", error=f"model {HOSTILE} gone\n\nlog tail:\nOther")
    html = reviewer_client.get(reverse("batches:detail", args=[batch.pk])).content.decode()
    assert 'id="batch-errors" hidden' not in html
    assert "<b>2 ×</b>" in html  # one line for both: grouped by the error's first line
    assert html.count("model &lt;script&gt;alert(1)&lt;/script&gt; gone") == 3  # the list and both rows
    assert HOSTILE not in html and "Trace" not in html  # the tail is for the trajectory's page

    state = reviewer_client.get(reverse("batches:state", args=[batch.pk])).json()
    assert state["status"] == "queued" and state["failed"] == 2 and state["left"] == 0
    assert state["errors"] == [[f"model {HOSTILE} gone", 2]]
    assert {row["error"] for row in state["rows"]} == {f"model {HOSTILE} gone"}


def test_the_trajectory_page_shows_the_error_and_its_log_tail_escaped(reviewer_client: Client) -> None:
    batch = batch_of_two()
    trajectory = batch.trajectories.order_by("id").first()
    assert trajectory is not None
    Trajectory.objects.filter(pk=trajectory.pk).update(status="failed", error=f"boom {HOSTILE}\n\nlog tail:\nTrace-9")
    html = reviewer_client.get(reverse("trajectories:detail", args=[trajectory.trajectory_id])).content.decode()
    assert 'id="trajectory-error" hidden' not in html
    assert "boom &lt;script&gt;" in html and "Trace-9" in html and HOSTILE not in html
    assert "failed before its first step" in html
    api = reviewer_client.get(reverse("trajectory-steps", args=[trajectory.trajectory_id])).json()
    assert api["error"].startswith("boom ") and api["step_count"] == 0 and api["status"] == "failed"


def test_a_cancelled_trajectory_shows_no_error_box(reviewer_client: Client) -> None:
    batch = batch_of_two()
    trajectory = batch.trajectories.order_by("id").first()
    assert trajectory is not None
    Trajectory.objects.filter(pk=trajectory.pk).update(status="cancelled", error="cancelled")
    html = reviewer_client.get(reverse("trajectories:detail", args=[trajectory.trajectory_id])).content.decode()
    assert 'id="trajectory-error" hidden' in html
