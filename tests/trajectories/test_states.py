"""One state machine: rows move only where they may, and a late writer never overwrites an end."""

from __future__ import annotations

import pytest

from core import states
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from trajectories.batches import cancel_batch, pending, resume_batch, start_batch
from trajectories.models import RolloutBatch, Trajectory
from trajectories.progress import claim, mark_batch_running, record_trajectory_end
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory
from webapp.celery import app

pytestmark = pytest.mark.django_db


def two_task_suite() -> TaskSuite:
    for task_id in ("task_0001", "task_0008"):
        import_task_dirs(DEMO / "tasks" / task_id, "states")
    return TaskSuite.objects.get(name="states")


def test_the_transitions_allow_only_forward_moves_and_retries() -> None:
    assert states.can_move("queued", "running") and states.can_move("running", "succeeded")
    assert states.can_move("failed", "queued")  # a retry
    for terminal in states.TERMINAL:
        assert not any(states.can_move(terminal, target) for target in states.TRANSITIONS)
    assert not states.can_move("queued", "succeeded")  # nothing ends without having run
    assert states.sources("cancelled") == ["queued", "running"]


def test_a_conditional_move_leaves_a_terminal_row_alone_and_says_so() -> None:
    batch = start_batch(two_task_suite(), RolloutSettings("scripted"), enqueue=False)
    stale = RolloutBatch.objects.get(pk=batch.pk)  # what a worker loaded before the cancel
    assert cancel_batch(batch)
    assert not states.transition(stale, states.SUCCEEDED)
    assert stale.status == "cancelled"  # refreshed from the database, not the stale copy's "queued"
    assert RolloutBatch.objects.get(pk=batch.pk).status == "cancelled"
    assert not cancel_batch(batch)  # cancelling twice changes nothing


def test_a_state_the_model_does_not_have_is_refused() -> None:
    batch = start_batch(two_task_suite(), RolloutSettings("scripted"), enqueue=False)
    trajectory = batch.trajectories.first()
    assert trajectory is not None
    with pytest.raises(states.StateError, match="has no state 'succeeded'"):
        states.transition(trajectory, states.SUCCEEDED)  # trajectories finish; batches succeed
    with pytest.raises(states.StateError):
        states.transition(batch, "exploded")


def test_a_cancelled_batch_never_reads_succeeded_when_its_last_trajectory_ends_later() -> None:
    batch = start_batch(two_task_suite(), RolloutSettings("scripted"), enqueue=False)
    first, second = batch.trajectories.order_by("id")
    run_trajectory(first.pk)
    assert claim(second.pk)  # a worker has the last one running...
    mark_batch_running(batch)
    cancel_batch(RolloutBatch.objects.get(pk=batch.pk))  # ...when a person cancels
    # The worker finishes anyway and tells the batch, with the batch row it loaded before.
    Trajectory.objects.filter(pk=second.pk).update(status="finished", termination="submitted")
    second.refresh_from_db()
    second.batch = RolloutBatch.objects.get(pk=batch.pk)
    second.batch.status = "running"
    record_trajectory_end(second)
    batch.refresh_from_db()
    assert batch.status == "cancelled"
    assert pending(batch) == []  # nothing of a cancelled batch runs again by itself
    assert not claim(second.pk) and run_trajectory(first.pk) is None


def test_a_job_delivered_after_the_cancel_runs_nothing() -> None:
    batch = start_batch(two_task_suite(), RolloutSettings("scripted"), enqueue=False)
    cancel_batch(batch)
    for trajectory in batch.trajectories.all():
        assert run_trajectory(trajectory.pk) is None
    assert set(batch.trajectories.values_list("status", flat=True)) == {"cancelled"}
    assert not batch.trajectories.filter(steps__isnull=False).exists()


def test_resume_is_the_one_way_out_of_cancelled() -> None:
    batch = start_batch(two_task_suite(), RolloutSettings("scripted"), enqueue=False)
    cancel_batch(batch)
    app.conf.task_always_eager = True  # the jobs run here, now
    try:
        assert resume_batch(batch) == 2
    finally:
        app.conf.task_always_eager = False
    batch.refresh_from_db()
    assert batch.status == "succeeded"
    assert set(batch.trajectories.values_list("status", flat=True)) == {"finished"}
    # A finished batch has nothing to resume and keeps its state.
    assert resume_batch(batch) == 0
    batch.refresh_from_db()
    assert batch.status == "succeeded"
