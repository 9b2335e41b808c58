"""Rollouts clean up after themselves: a worker runs thousands, so one leaked directory each fills its disk."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from core.vocabulary import PolicyKind, Termination, TrajectoryStatus
from sandbox.core import sandboxes_root
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from trajectories.batches import start_batch
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory

TASKS = ("task_0001", "task_0008")


def entries(*folders: Path) -> set[Path]:
    return {entry for folder in folders for entry in folder.iterdir()}


@pytest.mark.django_db
def test_a_scripted_batch_leaves_nothing_behind_in_the_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A private temporary directory: other test runs on this machine come and go in the shared one.
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setenv("CRUCIBLE_SANDBOX_DIR", str(private))
    for task_id in TASKS:
        import_task_dirs(DEMO / "tasks" / task_id, "leaks")
    batch = start_batch(TaskSuite.objects.get(name="leaks"), RolloutSettings(PolicyKind.SCRIPTED), enqueue=False)
    sandboxes = sandboxes_root()  # the shared root of every sandbox is there by design
    assert tempfile.gettempdir() == str(private) and sandboxes.parent == private
    before = entries(private, sandboxes)

    for trajectory in batch.trajectories.all():
        run_trajectory(trajectory.pk)

    finished = list(batch.trajectories.values_list("status", "termination"))
    assert finished == [(TrajectoryStatus.FINISHED, Termination.SUBMITTED)] * len(TASKS)
    assert entries(private, sandboxes) == before
