"""Celery jobs of the reward service (queue `rewards`): rollouts never score inline."""

from __future__ import annotations

from celery import shared_task

from rewards.services import score_trajectory
from rewards.spec import load_spec


@shared_task(queue="rewards", time_limit=1800, acks_late=True)
def score_trajectory_job(trajectory_id: str) -> dict[str, object]:
    """Idempotent per (trajectory, spec version): a retry returns the stored reward."""
    reward = score_trajectory(trajectory_id, load_spec())
    return {"trajectory_id": trajectory_id, "spec_version": reward.spec_version, "reward": reward.reward,
            "resolved": reward.resolved}
