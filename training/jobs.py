"""Celery jobs for training: one job per run, on the `training` queue (GPU hosts in a fleet)."""

from __future__ import annotations

import logging
import time

from celery import shared_task

from core.vocabulary import JobQueue
from training.launcher import execute

logger = logging.getLogger(__name__)

# A run may train for a day; the row's heartbeat, not this limit, tells a lost worker.
TIME_LIMIT = 7 * 24 * 3600


@shared_task(queue=JobQueue.TRAINING, time_limit=TIME_LIMIT, acks_late=True, reject_on_worker_lost=True)
def run_training_job(run_pk: int) -> dict[str, object]:
    """One training run. Delivered again after a worker died, it finds the row running under the
    dead worker and leaves it failed-and-resumable instead of starting over."""
    started = time.monotonic()
    try:
        run = execute(run_pk)
    except Exception:
        logger.exception("training run %s failed in its job after %.1f s", run_pk, time.monotonic() - started)
        raise
    if run is None:
        logger.info("training run %s was not ours to run (not queued)", run_pk)
        return {"run": run_pk, "ran": False}
    return {"run": run_pk, "ran": True, "status": run.status}
