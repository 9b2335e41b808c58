"""A scoring job lost from the broker (its message deleted from Redis, as a restart without
persistence or a worker dying before it acknowledged would lose it): the sweep notices the finished,
unscored rollout and scores it within its bound. Nobody runs anything by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis
from django.conf import settings

from rewards.jobs import score_trajectory_job
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, purge_queues
from tests.reliability.conftest import Worker, wait_for
from trajectories.batches import start_batch
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

LOST_AFTER_S = 3
SWEEP_S = 1


def test_a_scoring_message_deleted_from_redis_is_redone_by_the_sweep_within_its_bound(
    workers: Callable[..., Worker],
) -> None:
    import_task_dirs(DEMO / "tasks" / "task_0001", "lost-scoring")
    purge_queues("rewards")  # what earlier tests of this process left there is not this rollout's
    batch = start_batch(TaskSuite.objects.get(name="lost-scoring"), RolloutSettings("scripted"), enqueue=False)
    trajectory = run_trajectory(batch.trajectories.get().pk)  # finished: its scoring job is in the broker
    assert trajectory is not None and trajectory.status == "finished"
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        queue = f"{settings.REDIS_KEY_PREFIX}rewards"
        assert client.llen(queue) == 1, "the finished rollout's scoring job is waiting"
        client.delete(queue)  # lost
    finally:
        client.close()
    started = time.monotonic()
    worker = workers(
        "rewards",
        "--pool",
        "solo",
        env={"CRUCIBLE_LOST_AFTER_S": str(LOST_AFTER_S), "CRUCIBLE_SWEEP_S": str(SWEEP_S)},
    )

    def scored() -> bool:
        trajectory.refresh_from_db()
        return trajectory.scored_at is not None

    # The bound: waiting longer than LOST_AFTER_S makes it lost; a sweep every SWEEP_S finds it;
    # then one scoring (seconds) and the worker's start-up, generous for a loaded machine.
    wait_for(scored, LOST_AFTER_S + SWEEP_S + 60, "the sweep to score the lost rollout", worker)
    print(f"lost scoring redone {time.monotonic() - started:.1f} s after the worker was started")
    assert trajectory.final_reward == 1.0 and trajectory.success is True
    assert "never scored" in worker.tail(20000)  # the sweep said what it redid
    assert score_trajectory_job.name in worker.tail(20000)
