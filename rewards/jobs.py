"""Celery jobs of the reward service (queue `rewards`): rollouts never score inline."""

from __future__ import annotations

import logging
import time

from celery import shared_task

from core.vocabulary import JobQueue
from rewards.services import score_trajectory
from rewards.spec import load_spec

logger = logging.getLogger(__name__)


@shared_task(queue=JobQueue.REWARDS, time_limit=1800, acks_late=True)
def score_trajectory_job(trajectory_id: str) -> dict[str, object]:
    """Idempotent per (trajectory, spec version): a retry returns the stored reward.

    The sandbox is settings.CRUCIBLE_SANDBOX_BACKEND, as for every scoring.
    """
    started = time.monotonic()
    logger.info("scoring of %s started", trajectory_id)
    try:
        reward = score_trajectory(trajectory_id, load_spec())
    except Exception:
        logger.exception("scoring of %s failed after %.1f s", trajectory_id, time.monotonic() - started)
        raise
    logger.info("scoring of %s finished in %.1f s", trajectory_id, time.monotonic() - started)
    return {
        "trajectory_id": trajectory_id,
        "spec_version": reward.spec_version,
        "reward": reward.reward,
        "resolved": reward.resolved,
    }
