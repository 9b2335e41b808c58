"""Why a queued row waits: how many jobs its queue holds, and whether any worker consumes it.

A page that shows a queued row asks `queue_wait(queue)`: one pipelined round trip to Redis
(four LLENs and a ZCOUNT), never a Celery inspect/ping, which waits for every worker to answer.

Workers say which queues they consume through `record_consumer` (webapp.celery.ConsumerBeat):
a sorted set per queue of worker node names scored by the time of their last beat. A worker that
stops cleanly leaves the set at once; one that dies leaves it after CONSUMER_FRESH_S.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

# kombu's Redis transport keeps one list per priority step: the queue's own name for priority 0,
# `<queue>\x06\x16<step>` for the others (kombu.transport.redis PRIORITY_STEPS, Channel.sep).
PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (0, 3, 6, 9)
CONSUMER_BEAT_S = 15.0  # how often a worker says it is consuming
CONSUMER_FRESH_S = 60.0  # a worker silent for longer is taken for gone
REDIS_TIMEOUT_S = 0.5  # a page must not hang on a Redis that is away


@dataclass(frozen=True)
class QueueWait:
    """What a job queued on `queue` waits for; None where Redis could not be read."""

    queue: str
    # Messages in the queue's lists, the row's own among them: finding its place would mean reading
    # every message, so pages say how many wait, not how many are ahead.
    jobs_waiting: int | None
    consumers: int | None  # workers that beat within CONSUMER_FRESH_S while consuming the queue

    @property
    def unknown(self) -> bool:
        return self.jobs_waiting is None or self.consumers is None

    @property
    def unconsumed(self) -> bool:
        return self.consumers == 0


def queue_list_keys(queue: str, prefix: str) -> list[str]:
    """The Redis lists that hold `queue`'s messages under an instance's key prefix."""
    return [
        f"{prefix}{queue}" if step == 0 else f"{prefix}{queue}{PRIORITY_SEPARATOR}{step}" for step in PRIORITY_STEPS
    ]


def consumers_key(queue: str, prefix: str) -> str:
    return f"{prefix}consumers:{queue}"


def broker_client() -> redis.Redis:
    return redis.Redis.from_url(
        settings.CELERY_BROKER_URL, socket_connect_timeout=REDIS_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S
    )


def read_queue_wait(client: redis.Redis, queue: str, prefix: str, now: float | None = None) -> QueueWait:
    """One round trip: the queue's list lengths and its fresh consumers."""
    now = time.time() if now is None else now
    pipe = client.pipeline(transaction=False)
    for key in queue_list_keys(queue, prefix):
        pipe.llen(key)
    pipe.zcount(consumers_key(queue, prefix), now - CONSUMER_FRESH_S, "+inf")
    *lengths, consumers = pipe.execute()
    return QueueWait(queue=queue, jobs_waiting=sum(int(n) for n in lengths), consumers=int(consumers))


def queue_wait(queue: str) -> QueueWait:
    """What a row queued on this instance's `queue` waits for; unknowns where Redis is away."""
    client = broker_client()
    try:
        return read_queue_wait(client, queue, settings.REDIS_KEY_PREFIX)
    except (redis.RedisError, OSError) as exc:
        logger.warning("could not read queue %r from the broker: %s", queue, exc)
        return QueueWait(queue=queue, jobs_waiting=None, consumers=None)
    finally:
        client.close()


def record_consumer(
    client: redis.Redis, queues: Iterable[str], node: str, prefix: str, now: float | None = None
) -> None:
    """Mark worker `node` as consuming `queues` now; drop members gone silent."""
    now = time.time() if now is None else now
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        key = consumers_key(queue, prefix)
        pipe.zadd(key, {node: now})
        pipe.zremrangebyscore(key, "-inf", now - CONSUMER_FRESH_S)
        pipe.expire(key, int(CONSUMER_FRESH_S * 2))
    pipe.execute()


def forget_consumer(client: redis.Redis, queues: Iterable[str], node: str, prefix: str) -> None:
    """A worker stopping cleanly: its queues stop counting it at once."""
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        pipe.zrem(consumers_key(queue, prefix), node)
    pipe.execute()
