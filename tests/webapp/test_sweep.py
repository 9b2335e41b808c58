"""The sweep: what the broker holds (read from this instance's Redis keys), one sweeper per round for
the whole deployment, and queued work re-sent only when the broker lost it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from core.sweep import SweepContext
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, purge_queues
from trajectories.batches import requeue_lost_rollouts, start_batch
from trajectories.jobs import run_trajectory_job
from trajectories.models import RolloutBatch, Trajectory
from trajectories.rollout_settings import RolloutSettings
from webapp.celery import RedisBroker, sweep_once

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    purge_queues("rollouts")
    connection = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    connection.delete(f"{settings.REDIS_KEY_PREFIX}unacked", f"{settings.REDIS_KEY_PREFIX}sweep-lock")
    yield connection
    purge_queues("rollouts")
    connection.delete(f"{settings.REDIS_KEY_PREFIX}unacked")
    connection.close()


def test_the_broker_is_read_from_its_queues_and_from_what_workers_hold_unacknowledged(client: redis.Redis) -> None:
    run_trajectory_job.delay(41)
    run_trajectory_job.delay(42)
    broker = RedisBroker(client)
    assert broker.job_args(run_trajectory_job.name) == {(41,), (42,)}
    assert broker.job_args("some.other.job") == set()
    # A worker took one (acks_late: it stays in the unacked hash while the job runs).
    queue = f"{settings.REDIS_KEY_PREFIX}rollouts"
    taken = client.rpop(queue)
    assert isinstance(taken, bytes)
    client.hset(f"{settings.REDIS_KEY_PREFIX}unacked", "tag-1", json.dumps([json.loads(taken), "", "rollouts"]))
    client.lpush(queue, b"not json at all")  # a message nobody can read is skipped, not fatal
    assert broker.job_args(run_trajectory_job.name) == {(41,), (42,)}


def test_jobs_and_their_queue_are_this_instances_own(client: redis.Redis) -> None:
    run_trajectory_job.delay(7)
    (message,) = client.lrange(f"{settings.REDIS_KEY_PREFIX}rollouts", 0, -1)
    assert json.loads(message)["headers"]["crucible_instance"] == settings.CRUCIBLE_INSTANCE
    assert not client.exists("rollouts")  # nothing outside the instance's prefix


def test_one_sweeper_per_round_however_many_workers_offer(client: redis.Redis) -> None:
    results: list[object] = []
    barrier = threading.Barrier(5)

    def offer() -> None:
        barrier.wait()
        results.append(sweep_once(10.0))

    threads = [threading.Thread(target=offer) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(result is not None for result in results) == 1
    assert isinstance(next(r for r in results if r is not None), dict)


class Held:
    def __init__(self, held: set[tuple[object, ...]] | None) -> None:
        self.held = held

    def job_args(self, task_name: str) -> set[tuple[object, ...]] | None:
        return self.held


def test_only_queued_rows_the_broker_lost_are_sent_again_and_never_a_commands(client: redis.Redis) -> None:
    import_task_dirs(DEMO / "tasks" / "task_0001", "lost")
    suite = TaskSuite.objects.get(name="lost")
    web = start_batch(suite, RolloutSettings("scripted", samples=3))  # on the workers: its jobs went to the broker
    purge_queues("rollouts")  # ...and the broker lost them
    command = start_batch(suite, RolloutSettings("scripted", samples=2), enqueue=False)  # a `rollout` command's
    assert command.driver == RolloutBatch.Driver.COMMAND
    old = timezone.now() - timedelta(minutes=10)
    Trajectory.objects.update(created_at=old)
    one, two, three = web.trajectories.order_by("id")
    # One of them the broker still holds; it is not sent twice.
    assert requeue_lost_rollouts({one.pk}, older_than=60) == 2
    sent = {args[0] for args in RedisBroker(client).job_args(run_trajectory_job.name) or set()}
    assert sent == {two.pk, three.pk}
    # A row queued a moment ago may still be on its way in.
    Trajectory.objects.filter(pk=one.pk).update(created_at=timezone.now())
    assert requeue_lost_rollouts(set(), older_than=60) == 2  # two and three again; never one nor the command's
    assert SweepContext(Held(None), 60).broker.job_args("x") is None
