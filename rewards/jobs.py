"""Celery jobs of the reward service (queue `rewards`): rollouts never score inline.

A scoring job tells the trajectory's live group what it is doing, so an open trajectory
page shows "scoring…" and then the result without a reload (static/js/trajectory.js reads
these events; a field renamed here must be renamed there):

    {"kind": "scoring", "state": "running"}
    {"kind": "scoring", "state": "succeeded", "reward": 1.0, "resolved": true, "spec_version": "..."}
    {"kind": "scoring", "state": "failed", "error": "one line"}
"""

from __future__ import annotations

import logging
import time
from typing import Literal, NotRequired, TypedDict

from celery import shared_task

from core.live import publish_on_commit
from core.vocabulary import JobQueue
from rewards.services import active_spec, record_scoring_failure, score_trajectory
from trajectories.events import trajectory_live_group

logger = logging.getLogger(__name__)

ERROR_SHOWN = 300  # characters of a failure's message sent to the page


class ScoringEvent(TypedDict):
    kind: Literal["scoring"]
    state: Literal["running", "succeeded", "failed"]
    reward: NotRequired[float]
    resolved: NotRequired[bool]
    spec_version: NotRequired[str]
    error: NotRequired[str]


def _tell(trajectory_id: str, event: ScoringEvent) -> None:
    publish_on_commit(trajectory_live_group(trajectory_id), event)


# track_started: the rescore button's status line asks the result backend whether the job
# has left the queue (rewards.views.rescore_status), e.g. after the page's socket reconnects.
@shared_task(queue=JobQueue.REWARDS, time_limit=1800, acks_late=True, track_started=True)
def score_trajectory_job(trajectory_id: str) -> dict[str, object]:
    """Idempotent per (trajectory, spec version): a retry returns the stored reward.

    The sandbox is settings.CRUCIBLE_SANDBOX_BACKEND, as for every scoring.
    """
    started = time.monotonic()
    logger.info("scoring of %s started", trajectory_id)
    _tell(trajectory_id, {"kind": "scoring", "state": "running"})
    spec = None
    try:
        spec = active_spec()
        reward = score_trajectory(trajectory_id, spec)
    except Exception as exc:
        logger.exception("scoring of %s failed after %.1f s", trajectory_id, time.monotonic() - started)
        message = " ".join(str(exc).split())[:ERROR_SHOWN] or type(exc).__name__
        if spec is not None:
            # On the row: the page offers a retry, and the sweep leaves it until someone asks.
            record_scoring_failure(trajectory_id, spec.version, f"{type(exc).__name__}: {exc}")
        _tell(trajectory_id, {"kind": "scoring", "state": "failed", "error": message})
        raise
    logger.info("scoring of %s finished in %.1f s", trajectory_id, time.monotonic() - started)
    _tell(
        trajectory_id,
        {
            "kind": "scoring",
            "state": "succeeded",
            "reward": reward.reward,
            "resolved": reward.resolved,
            "spec_version": reward.spec_version,
        },
    )
    return {
        "trajectory_id": trajectory_id,
        "spec_version": reward.spec_version,
        "reward": reward.reward,
        "resolved": reward.resolved,
    }


@shared_task(queue=JobQueue.REWARDS, time_limit=7 * 24 * 3600, acks_late=True, reject_on_worker_lost=True)
def score_run_job(run_pk: int) -> dict[str, object]:
    """A bulk scoring run (rewards.bulk). Safe to deliver twice: only the attempt that claims the row runs it."""
    from rewards.bulk import run_scoring_run

    started = time.monotonic()
    run = run_scoring_run(run_pk)
    if run is None:
        logger.info("scoring run %s was not ours to run (held by another attempt, or done)", run_pk)
        return {"run": run_pk, "ran": False}
    logger.info("scoring run %s ended %s in %.1f s", run_pk, run.status, time.monotonic() - started)
    return {"run": run_pk, "ran": True, "status": run.status, "scored": run.scored, "failed": run.failed}


@shared_task(queue=JobQueue.REWARDS, time_limit=3600, acks_late=True)
def reward_check_job(check_pk: int) -> dict[str, object]:
    """A suite's reward check (rewards.reward_checks). Safe to deliver twice: only the attempt that claims it runs."""
    from rewards.reward_checks import run_reward_check

    started = time.monotonic()
    logger.info("reward check %s started", check_pk)
    check = run_reward_check(check_pk)
    if check is None:
        logger.info("reward check %s was not ours to run (held by another attempt, or done)", check_pk)
        return {"check": check_pk, "ran": False}
    logger.info("reward check %s ended %s in %.1f s", check_pk, check.status, time.monotonic() - started)
    return {"check": check_pk, "ran": True, "status": check.status, "blind": check.blind}
