"""What the reward service does when trajectories tell it something (connected in RewardsConfig.ready)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from rewards.jobs import score_trajectory_job
from trajectories.models import Trajectory
from trajectories.signals import trajectory_finished


def score_finished_trajectory(sender: type[Trajectory], trajectory: Trajectory, **kwargs: Any) -> None:
    trajectory_id = str(trajectory.trajectory_id)
    # The worker must find the finished row, so the job goes out only once it is committed.
    transaction.on_commit(lambda: score_trajectory_job.delay(trajectory_id))


def connect() -> None:
    trajectory_finished.connect(
        score_finished_trajectory, sender=Trajectory, dispatch_uid="rewards.score_finished_trajectory"
    )
