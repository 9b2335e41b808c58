"""Celery app: one broker (Redis), the queues of core.vocabulary.JobQueue, jobs found in each app's `jobs.py`."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery, bootsteps
from kombu import Queue
from kombu.transport import redis as kombu_redis

from core.vocabulary import JobQueue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
logger = logging.getLogger(__name__)


class RedisChannel(kombu_redis.Channel):
    """kombu's Redis channel, able to close after its connection has been detached.

    When Redis goes away while a worker holds unacknowledged messages (a late-acked rollout
    running in a pool process), Celery's consumer first `collect()`s the broken connection,
    which detaches the transport from it (`transport.client = None`) without closing this
    channel, then closes the connection, which closes this channel, which tries to put the
    unacknowledged messages back and so builds a new connection pool from
    `transport.client`: AttributeError "'NoneType' object has no attribute 'hostname'".
    That is not a connection error, so Celery does not retry; the worker dies with
    "Unrecoverable error" (kombu 5.7.0, celery 5.7.0, redis-py 8.1.0).

    The channel keeps the connection's details from when it was opened and uses them for that
    last attempt: with Redis back, the messages are restored; still down, the attempt fails
    with redis's ConnectionError, which Celery ignores while it reconnects. Either way the
    worker lives, and a rollout delivered twice runs once (trajectories.progress.claim).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._opened_with = self.connection.client

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        transport = self.connection
        if transport.client is not None or self._opened_with is None:
            return dict(super()._connparams(asynchronous=asynchronous))
        transport.client = self._opened_with
        try:
            return dict(super()._connparams(asynchronous=asynchronous))
        finally:
            transport.client = None


kombu_redis.Transport.Channel = RedisChannel


class RequeueLostRollouts(bootsteps.StartStopStep):
    """On each connection to the broker, put back the rollouts a Redis restart took with it.

    Redis runs without persistence here (`make run`), so a restart empties the queues: the
    batch's queued trajectories would wait forever. The database knows what is still to run;
    when the `rollouts` queue is empty while trajectories wait, they are enqueued again. A
    message sent twice (two workers checking at once, one prefetched elsewhere) costs a claim,
    never a second run (trajectories.progress.claim).
    """

    requires = {"celery.worker.consumer.tasks:Tasks"}
    check: Any = None

    def start(self, parent: Any) -> None:
        if JobQueue.ROLLOUTS not in {q.name for q in parent.task_consumer.queues}:
            return
        if self.check is None:
            # A worker killed mid-rollout leaves its row running; any worker of the queue takes it back.
            from django.conf import settings

            stale = float(settings.CRUCIBLE_ROLLOUT_STALE_S)
            self.check = parent.timer.call_repeatedly(stale / 3, requeue_dead, (stale,))
        try:
            if parent.connection.default_channel._size(JobQueue.ROLLOUTS):
                return  # the queue is there: nothing was lost
            from trajectories.batches import requeue_lost_rollouts

            requeue_lost_rollouts()
        except Exception:  # noqa: BLE001 - a failed check must not stop the worker consuming
            logger.exception("could not check for rollouts lost with the broker")

    def stop(self, parent: Any) -> None:
        if self.check is not None:
            self.check.cancel()
            self.check = None


def requeue_dead(stale_after: float) -> None:
    from django.db import close_old_connections

    from trajectories.batches import requeue_dead_rollouts

    try:
        requeue_dead_rollouts(stale_after)
    except Exception:  # noqa: BLE001 - a failed check must not stop the worker; the next one tries again
        logger.exception("could not check for rollouts whose worker died")
        close_old_connections()


app = Celery("crucible")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in JobQueue]
app.steps["consumer"].add(RequeueLostRollouts)
app.autodiscover_tasks(related_name="jobs")
