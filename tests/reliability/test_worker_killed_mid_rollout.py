"""A Celery worker killed (SIGKILL) in the middle of a rollout: a new worker finishes the batch by itself.

Nobody resumes anything: the test only starts a second worker, as a supervisor (systemd,
Kubernetes) would, and then reads the database.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db.models import Count

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from tests.reliability.conftest import Worker, wait_for
from trajectories.batches import start_batch
from trajectories.models import RolloutBatch, Step, Trajectory
from trajectories.rollout_settings import RolloutSettings

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TASKS = ("task_0001", "task_0008", "task_0013")
SAMPLES = 2
# The dead-worker window, short so the test is quick; rollouts beat three times within it.
STALE = {"CRUCIBLE_ROLLOUT_STALE_S": "3"}


def test_a_worker_killed_mid_rollout_is_replaced_and_the_batch_completes_with_nothing_doubled(
    workers: Callable[..., Worker],
) -> None:
    for task_id in TASKS:
        import_task_dirs(DEMO / "tasks" / task_id, "killed-mid-rollout")
    first = workers("rollouts", "--pool", "solo", env=STALE)  # first: starting one purges the queue
    batch = start_batch(TaskSuite.objects.get(name="killed-mid-rollout"), RolloutSettings("scripted", samples=SAMPLES))
    in_flight = Trajectory.objects.filter(batch=batch, status="running", step_count__gte=1)
    wait_for(in_flight.exists, 90, "a rollout half-way through its steps", first)
    first.kill()
    killed = Trajectory.objects.get(batch=batch, status="running")  # left as the crash found it

    second = workers("rollouts", "--pool", "solo", env=STALE)

    def ended() -> bool:
        batch.refresh_from_db()
        return batch.status in ("succeeded", "failed")

    wait_for(ended, 60, f"the batch to end (the killed rollout is {killed.trajectory_id})", second)
    rows = batch.trajectories.all()
    assert batch.status == RolloutBatch.Status.SUCCEEDED, second.tail()
    assert rows.count() == len(TASKS) * SAMPLES
    assert set(rows.values_list("status", flat=True)) == {"finished"}  # none stuck running
    per_slot = rows.values("task_ref", "sample_index").annotate(n=Count("id")).values_list("n", flat=True)
    assert list(per_slot) == [1] * len(TASKS) * SAMPLES
    for trajectory in rows:  # each ran to one clean record: the dead attempt's steps are gone
        numbers = list(Step.objects.filter(trajectory=trajectory).order_by("step").values_list("step", flat=True))
        assert numbers == list(range(1, trajectory.step_count + 1))
        assert trajectory.termination == "submitted"
    assert Trajectory.objects.get(pk=killed.pk).attempt == 2  # the killed one ran again, once
