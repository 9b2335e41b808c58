"""What the deployment's sweep (core.sweep) redoes for rollouts."""

from __future__ import annotations

from core.sweep import SweepContext, register
from trajectories.batches import requeue_dead_rollouts, requeue_lost_rollouts
from trajectories.jobs import run_trajectory_job


def lost_rollouts(context: SweepContext) -> int:
    """Rollouts whose attempt stopped beating, and queued rollouts whose job the broker no longer holds."""
    redone = requeue_dead_rollouts()
    held = context.broker.job_args(run_trajectory_job.name)
    if held is not None:  # an unreadable broker says nothing about what it lost
        pks = {args[0] for args in held if args and isinstance(args[0], int)}
        redone += requeue_lost_rollouts(pks, older_than=context.lost_after)
    return redone


def connect() -> None:
    register("rollouts", lost_rollouts)
