"""Celery app: one broker (Redis), the queues of core.vocabulary.JobQueue, jobs found in each app's `jobs.py`."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
from typing import Any

import redis
from celery import Celery, Task, bootsteps
from celery.signals import before_task_publish
from kombu import Queue
from kombu.transport import redis as kombu_redis
from redis.exceptions import RedisError

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
    """On each connection to the broker, put back at once the rollouts a Redis restart took with it.

    Redis runs without persistence here (`make run`), so a restart empties the queues: the
    batch's queued trajectories would wait for the next sweep. When the `rollouts` queue is empty
    while trajectories of the workers' batches wait, they are enqueued again. A message sent
    twice (two workers checking at once, one prefetched elsewhere) costs a claim, never a second
    run (trajectories.progress.claim).
    """

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def start(self, parent: Any) -> None:
        if JobQueue.ROLLOUTS not in {q.name for q in parent.task_consumer.queues}:
            return
        try:
            if parent.connection.default_channel._size(JobQueue.ROLLOUTS):
                return  # the queue is there: nothing was lost
            from trajectories.batches import requeue_lost_rollouts

            requeue_lost_rollouts()
        except Exception:  # noqa: BLE001 - a failed check must not stop the worker consuming
            logger.exception("could not check for rollouts lost with the broker")


class Sweeper(bootsteps.StartStopStep):
    """Every worker offers to sweep for lost work every CRUCIBLE_SWEEP_S (core.sweep); one does.

    The lock is a Redis key with an expiry shorter than the period: whichever worker sets it first
    sweeps, the others skip that round; a worker that dies holding it costs at most one round.
    """

    requires = {"celery.worker.consumer.tasks:Tasks"}
    timer: Any = None

    def start(self, parent: Any) -> None:
        if self.timer is None:
            from django.conf import settings

            period = float(settings.CRUCIBLE_SWEEP_S)
            self.timer = parent.timer.call_repeatedly(period, sweep_once, (period,))

    def stop(self, parent: Any) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class ConsumerBeat(bootsteps.StartStopStep):
    """Says in Redis, every CONSUMER_BEAT_S, which queues this worker consumes (core.queue_waits).

    Pages showing a queued row read it to tell whether anything will ever take the job, without
    a Celery ping that waits on every worker.
    """

    requires = {"celery.worker.consumer.tasks:Tasks"}
    timer: Any = None
    queues: list[str] = []

    def start(self, parent: Any) -> None:
        from core.queue_waits import CONSUMER_BEAT_S

        self.queues = sorted(q.name for q in parent.task_consumer.queues)
        beat_consumer(self.queues, parent.hostname)
        if self.timer is None:
            self.timer = parent.timer.call_repeatedly(CONSUMER_BEAT_S, beat_consumer, (self.queues, parent.hostname))

    def stop(self, parent: Any) -> None:
        # Stopping (shutdown, or a lost connection that start() will follow) withdraws the worker
        # at once, so a page does not count it for the minute its last beat stays fresh.
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.queues:
            withdraw_consumer(self.queues, parent.hostname)

    shutdown = stop


def withdraw_consumer(queues: list[str], node: str) -> None:
    from django.conf import settings

    from core.queue_waits import forget_consumer

    client = _redis()
    try:
        forget_consumer(client, queues, node, settings.REDIS_KEY_PREFIX)
    except RedisError as exc:
        logger.warning("could not withdraw this worker from the consumers of %s: %s", ",".join(queues), exc)
    finally:
        client.close()


def beat_consumer(queues: list[str], node: str) -> None:
    from django.conf import settings

    from core.queue_waits import record_consumer

    client = _redis()
    try:
        record_consumer(client, queues, node, settings.REDIS_KEY_PREFIX)
    except RedisError as exc:
        logger.warning("could not record this worker as consuming %s: %s", ",".join(queues), exc)
    finally:
        client.close()


def sweep_once(period: float) -> dict[str, int] | None:
    """One round of the sweep if this process wins the round's lock; what it redid."""
    from django.conf import settings
    from django.db import close_old_connections

    from core.sweep import SweepContext, sweep

    client = _redis()
    try:
        if not client.set(f"{settings.REDIS_KEY_PREFIX}sweep-lock", os.getpid(), nx=True, px=int(period * 900)):
            return None
        return sweep(SweepContext(RedisBroker(client), float(settings.CRUCIBLE_LOST_AFTER_S)))
    except RedisError as exc:
        logger.warning("no sweep this round, Redis unavailable: %s", exc)
        return None
    finally:
        client.close()
        close_old_connections()


def _redis() -> redis.Redis:
    from django.conf import settings

    return redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=5, socket_timeout=30)


class RedisBroker:
    """What this instance's Redis broker holds, read from its keys (core.sweep.Broker).

    kombu keeps a queue as a list per priority (`<queue>`, `<queue>\\x06\\x16<n>`) of JSON messages
    whose body is base64 JSON `[args, kwargs, embed]`, and the messages delivered to a worker and not
    yet acknowledged (acks_late: every job while it runs) in the `unacked` hash; all under the
    instance's prefix. A message that cannot be read is skipped.
    """

    def __init__(self, client: redis.Redis) -> None:
        from django.conf import settings

        self.client = client
        self.prefix = settings.REDIS_KEY_PREFIX

    def job_args(self, task_name: str) -> set[tuple[object, ...]] | None:
        try:
            raw = [payload for queue in JobQueue for payload in self._queued(queue)]
            unacked = self.client.hvals(f"{self.prefix}unacked")
            raw += [self._unwrap(_as_bytes(value)) for value in unacked]  # type: ignore[union-attr]
        except RedisError as exc:
            logger.warning("could not read the broker's queues: %s", exc)
            return None
        found: set[tuple[object, ...]] = set()
        for payload in raw:
            args = _job_args(payload, task_name)
            if args is not None:
                found.add(args)
        return found

    def _queued(self, queue: str) -> list[bytes]:
        keys: list[str] = [
            f"{self.prefix}{queue}",
            *(k.decode() for k in self.client.scan_iter(f"{self.prefix}{queue}\x06\x16*")),
        ]
        return [_as_bytes(payload) for key in keys for payload in self.client.lrange(key, 0, -1)]  # type: ignore[union-attr]

    @staticmethod
    def _unwrap(value: bytes) -> bytes:
        try:
            message = json.loads(value)[0]  # [message, exchange, routing_key]
        except (ValueError, IndexError, KeyError, TypeError):
            return b""
        return json.dumps(message).encode()


def _as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _job_args(payload: bytes, task_name: str) -> tuple[object, ...] | None:
    try:
        message = json.loads(payload)
        if message.get("headers", {}).get("task") != task_name:
            return None
        args = json.loads(base64.b64decode(message["body"]))[0]
        return tuple(args)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, binascii.Error):
        return None


class InstanceTask(Task):
    """A job of this instance only: one published by another Crucible instance is refused, loudly.

    Queues are namespaced per instance (CRUCIBLE_INSTANCE), so another instance's job reaches a
    worker only through a misconfiguration (two deployments given one instance name for two
    databases, say); running it would act on rows of the wrong database.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from django.conf import settings

        origin = getattr(self.request, INSTANCE_HEADER, None)
        # A job from a message; called directly (a test, a command) or eagerly it is not one.
        delivered = self.request.id is not None and not self.request.is_eager
        if delivered and origin != settings.CRUCIBLE_INSTANCE:
            logger.error(
                "refusing job %s %s: it was published by Crucible instance %r, and this worker is %r",
                self.name,
                self.request.id,
                origin,
                settings.CRUCIBLE_INSTANCE,
            )
            return {"refused": "another instance's job", "instance": origin}
        return super().__call__(*args, **kwargs)


INSTANCE_HEADER = "crucible_instance"


@before_task_publish.connect
def _stamp_instance(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    from django.conf import settings

    if headers is not None:
        headers[INSTANCE_HEADER] = settings.CRUCIBLE_INSTANCE


app = Celery("crucible", task_cls=InstanceTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in JobQueue]
app.steps["consumer"].add(RequeueLostRollouts)
app.steps["consumer"].add(Sweeper)
app.steps["consumer"].add(ConsumerBeat)
app.autodiscover_tasks(related_name="jobs")
