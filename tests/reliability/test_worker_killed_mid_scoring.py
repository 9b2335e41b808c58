"""A rewards worker's process killed (SIGKILL, as the OOM killer does) while it runs a trajectory's tests.

The score is all or nothing: while the job is lost there is no reward, no scored_at and no step
reward; the job goes back to the queue, is scored once, and scoring again adds no second row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psutil
import pytest
from django.db.models import Count, Q

from rewards.jobs import score_trajectory_job
from rewards.models import Reward
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from tests.reliability.conftest import Worker, wait_for
from trajectories.batches import start_batch
from trajectories.models import Trajectory
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def score_state(trajectory: Trajectory) -> dict[str, Any]:
    """Reward rows, scored_at and rewarded steps, read in one statement: one snapshot of the database."""
    return dict(
        Trajectory.objects.filter(pk=trajectory.pk)
        .annotate(
            n_rewards=Count("rewards", distinct=True),
            n_rewarded=Count("steps", filter=Q(steps__reward__isnull=False), distinct=True),
        )
        .values("n_rewards", "n_rewarded", "scored_at")
        .get()
    )


def scoring_sandbox_running(worker: Worker) -> psutil.Process | None:
    """The pool process that runs the scoring job, once its sandbox (the hidden tests) is running."""
    for child in psutil.Process(worker.proc.pid).children():
        try:
            if child.children():
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def test_a_worker_killed_mid_scoring_leaves_no_partial_score_and_the_job_is_scored_once(
    workers: Callable[..., Worker],
) -> None:
    import_task_dirs(DEMO / "tasks" / "task_0001", "killed-mid-scoring")
    batch = start_batch(TaskSuite.objects.get(name="killed-mid-scoring"), RolloutSettings("scripted"), enqueue=False)
    worker = workers("rewards", "--concurrency", "1")
    trajectory = run_trajectory(batch.trajectories.get().pk)  # finished: its scoring job is queued
    assert trajectory is not None and trajectory.status == "finished"

    killed: list[psutil.Process] = []

    def kill_while_its_tests_run() -> bool:
        # Found and killed in one look: the hidden tests run for about a second, and a second
        # look could come after they finished (and the reward was written).
        pool_process = scoring_sandbox_running(worker)
        if pool_process is not None:
            pool_process.kill()
            killed.append(pool_process)
        return bool(killed)

    wait_for(kill_while_its_tests_run, 60, "the scoring job's sandbox", worker)

    # Killed while its tests ran, the job had written nothing, and nothing half-written shows:
    # the reward row, scored_at and the step rewards are one transaction.
    state = score_state(trajectory)
    assert state == {"n_rewards": 0, "n_rewarded": 0, "scored_at": None}, state

    # The lost job comes back by itself (acks_late + reject_on_worker_lost) and scores once.
    wait_for(lambda: score_state(trajectory)["scored_at"] is not None, 60, "the re-queued job to score", worker)
    assert "WorkerLostError" in worker.tail(20000) or "SIGKILL" in worker.tail(20000)
    again = score_trajectory_job.delay(str(trajectory.trajectory_id)).get(timeout=60)  # a person's rescore
    reward = Reward.objects.get(trajectory=trajectory)  # one row per spec, however often it was scored
    assert again["reward"] == reward.reward == 1.0 and reward.resolved
    state = score_state(trajectory)
    assert state["n_rewards"] == 1 and state["n_rewarded"] == len(reward.process) > 0
