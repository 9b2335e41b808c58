"""Celery jobs for trajectories."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from celery import shared_task

from trajectories.services import import_trajectories


@shared_task(queue="default", time_limit=3600, acks_late=True)
def import_trajectories_job(path: str) -> dict[str, int]:
    """Import a large JSONL file in the background.

    Safe to run again after a crash: the import is one transaction and skips
    trajectories already stored, so a retry neither duplicates nor half-writes.
    """
    return asdict(import_trajectories(Path(path)))


@shared_task(queue="rollouts", time_limit=6 * 3600, acks_late=True, reject_on_worker_lost=True)
def run_trajectory_job(trajectory_pk: int, stale_after: float | None = None) -> dict[str, object]:
    """One rollout. Safe to deliver twice: only the worker that claims the row runs it."""
    from trajectories.rollouts import run_trajectory

    trajectory = run_trajectory(trajectory_pk, stale_after)
    if trajectory is None:
        return {"trajectory": trajectory_pk, "ran": False}
    return {"trajectory": trajectory_pk, "ran": True, "status": trajectory.status,
            "termination": trajectory.termination, "steps": trajectory.step_count}


@shared_task(queue="rollouts", time_limit=3600, acks_late=True)
def replay_trajectory_job(trajectory_id: str) -> dict[str, object]:
    """Re-run a trajectory's actions in a fresh sandbox and keep the comparison on the row."""
    from dataclasses import asdict

    from django.utils import timezone

    from trajectories.models import Trajectory
    from trajectories.rollouts import replay_trajectory

    report = replay_trajectory(trajectory_id)
    data = {**asdict(report), "reproducible": report.reproducible, "at": timezone.now().isoformat()}
    Trajectory.objects.filter(trajectory_id=trajectory_id).update(replay_report=data)
    return data
