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
