"""Lost work, found and redone: one periodic sweep for the whole deployment.

Work is lost in ways no single process sees: a worker SIGKILLed or stopped mid-rollout (its row
stops beating), a Redis restart that empties the queues (rows wait for a job that no longer
exists), a scoring message consumed by a worker that died before it acknowledged anything. The
database says what should be happening; the broker says what is queued or being worked on. A
sweep compares the two and enqueues again what fell between them.

Each app registers what it knows how to find (`register`, from its AppConfig.ready(); core imports
no app). Every worker offers to sweep on a timer (webapp.celery.Sweeper) and a lock in Redis lets
one of them at a time do it, so a fleet of workers sweeps once per period, not once per process.
Every sweeper is safe to run twice at once anyway: each move is a conditional UPDATE or a claim.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from django.db import close_old_connections

logger = logging.getLogger(__name__)


class Broker(Protocol):
    def job_args(self, task_name: str) -> set[tuple[object, ...]] | None:
        """The positional arguments of every job of `task_name` the broker holds (waiting in a
        queue, or delivered and not yet acknowledged); None when the broker cannot be read."""


@dataclass(frozen=True)
class SweepContext:
    broker: Broker
    # Work waiting longer than this that the broker does not hold counts as lost.
    lost_after: float


Sweeper = Callable[[SweepContext], int]
_sweepers: dict[str, Sweeper] = {}


def register(name: str, sweeper: Sweeper) -> None:
    """One sweeper per name; registering the same name again replaces it (a reloaded app)."""
    _sweepers[name] = sweeper


def sweepers() -> dict[str, Sweeper]:
    return dict(_sweepers)


def sweep(context: SweepContext) -> dict[str, int]:
    """Run every sweeper; what each redid. One that fails is logged and the others still run."""
    done: dict[str, int] = {}
    for name, sweeper in sorted(_sweepers.items()):
        started = time.monotonic()
        try:
            done[name] = sweeper(context)
        except Exception:  # noqa: BLE001 - one broken sweeper must not keep the others from their work
            logger.exception("sweep %s failed; the next sweep tries again", name)
            close_old_connections()
            continue
        if done[name]:
            logger.warning("sweep %s redid %d in %.2f s", name, done[name], time.monotonic() - started)
    return done
