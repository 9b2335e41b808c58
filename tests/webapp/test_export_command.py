"""`manage.py export` for tasks, trajectories and training sets (preferences: tests/annotation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from training.models import TrainingSet
from training.queries import export_lines
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db


def exported_ids(path: Path) -> list[str]:
    return [json.loads(line)["trajectory_id"] for line in path.read_text().splitlines()]


def test_the_default_trajectory_export_skips_unfinished_ones(tmp_path: Path) -> None:
    done = StepFactory.create().trajectory
    imported_without_steps = TrajectoryFactory.create()  # an imported record may have no steps: still data
    for status in ("queued", "running", "cancelled", "failed"):
        TrajectoryFactory.create(status=status, final_reward=None, success=None)
    out = tmp_path / "t.jsonl"
    call_command("export", "trajectories", "--out", str(out), verbosity=0)
    assert sorted(exported_ids(out)) == sorted([str(done.trajectory_id), str(imported_without_steps.trajectory_id)])
    call_command("export", "trajectories", "--out", str(out), "--include-unfinished", verbosity=0)
    assert len(exported_ids(out)) == Trajectory.objects.count() == 6


def test_a_training_set_exports_its_newest_or_a_named_version(tmp_path: Path) -> None:
    first, second = TrajectoryFactory.create(), TrajectoryFactory.create()
    TrainingSet.objects.create(name="oracle", version=1, trajectory_ids=[str(first.trajectory_id)])
    newest = TrainingSet.objects.create(
        name="oracle", version=2, trajectory_ids=[str(first.trajectory_id), str(second.trajectory_id)]
    )
    out = tmp_path / "ts.jsonl"
    call_command("export", "training-set", "--set", "oracle", "--out", str(out), verbosity=0)
    assert out.read_bytes() == b"".join(export_lines(newest))  # what the training set page serves
    assert len(exported_ids(out)) == 2
    call_command("export", "training-set", "--set", "oracle@1", "--out", str(out), verbosity=0)
    assert exported_ids(out) == [str(first.trajectory_id)]
    for bad, message in (
        ("oracle@9", "no training set 'oracle@9'"),
        ("oracle@x", "training set version must be a number"),
    ):
        with pytest.raises(CommandError, match=message):
            call_command("export", "training-set", "--set", bad, "--out", str(tmp_path / "no.jsonl"), verbosity=0)
    assert not (tmp_path / "no.jsonl").exists()


def test_tasks_export_by_suite(tmp_path: Path) -> None:
    mine = TaskFactory.create(suite__name="mine")
    TaskFactory.create(suite__name="other")
    out = tmp_path / "tasks.jsonl"
    call_command("export", "tasks", "--suite", "mine", "--out", str(out), verbosity=0)
    assert [json.loads(line)["task_id"] for line in out.read_text().splitlines()] == [mine.task_id]
