"""Celery jobs for trajectories.

Jobs import the verbs they run at the top; the verbs that enqueue jobs (trajectories.batches)
import this module, and nothing here imports them back, so the dependency runs one way.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from celery import shared_task

from core.vocabulary import JobQueue
from trajectories.replay import run_replay
from trajectories.runner import run_trajectory
from trajectories.services import import_trajectories

logger = logging.getLogger(__name__)


@shared_task(queue=JobQueue.DEFAULT, time_limit=3600, acks_late=True)
def import_trajectories_job(path: str, allow_unknown_tasks: bool = False) -> dict[str, int]:
    """Import a large JSONL file in the background (refusing unknown tasks unless allowed).

    Safe to run again after a crash: the import is one transaction and skips
    trajectories already stored, so a retry neither duplicates nor half-writes.
    """
    started = time.monotonic()
    logger.info("import of %s started", path)
    try:
        result = import_trajectories(Path(path), allow_unknown_tasks=allow_unknown_tasks)
    except Exception:
        logger.exception("import of %s failed after %.1f s", path, time.monotonic() - started)
        raise
    logger.info(
        "import of %s finished in %.1f s: %d created, %d skipped, %d steps",
        path,
        time.monotonic() - started,
        result.created,
        result.skipped,
        result.steps,
    )
    return asdict(result)


@shared_task(queue=JobQueue.ROLLOUTS, time_limit=6 * 3600, acks_late=True, reject_on_worker_lost=True)
def run_trajectory_job(trajectory_pk: int) -> dict[str, object]:
    """One rollout. Safe to deliver twice: only the worker that claims the row runs it."""
    started = time.monotonic()
    logger.info("rollout of trajectory row %s started", trajectory_pk)
    try:
        trajectory = run_trajectory(trajectory_pk)
    except Exception:
        logger.exception("rollout of trajectory row %s failed after %.1f s", trajectory_pk, time.monotonic() - started)
        raise
    if trajectory is None:
        logger.info("trajectory row %s was not ours to run (held by another attempt, or done)", trajectory_pk)
        return {"trajectory": trajectory_pk, "ran": False}
    logger.info(
        "rollout %s finished in %.1f s: %s, %s after %d steps",
        trajectory.trajectory_id,
        time.monotonic() - started,
        trajectory.status,
        trajectory.termination or "-",
        trajectory.step_count,
    )
    return {
        "trajectory": trajectory_pk,
        "ran": True,
        "status": trajectory.status,
        "termination": trajectory.termination,
        "steps": trajectory.step_count,
    }


@shared_task(queue=JobQueue.ROLLOUTS, time_limit=3600, acks_late=True)
def replay_trajectory_job(trajectory_id: str) -> dict[str, Any]:
    """Re-run a trajectory's actions in a fresh sandbox and keep the comparison on the row."""
    started = time.monotonic()
    logger.info("replay of %s started", trajectory_id)
    try:
        # Progress, the report and any error go on the row and to the page (trajectories.replay).
        data = run_replay(trajectory_id)
    except Exception:
        logger.exception("replay of %s failed after %.1f s", trajectory_id, time.monotonic() - started)
        raise
    logger.info(
        "replay of %s finished in %.1f s in %s: %d of %d steps the same",
        trajectory_id,
        time.monotonic() - started,
        data["backend"],
        data["same"],
        data["steps"],
    )
    return data
