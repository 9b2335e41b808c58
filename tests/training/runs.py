"""Shared set-up for the training-run tests: verified sets, configs, the fake trainer."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tasks.models import Task
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from tests.training.helpers import record_score
from training.curation import CurationRule, build_training_set
from training.models import TrainingRun, TrainingSet
from trajectories.models import Trajectory

MODEL = str(settings.CRUCIBLE_DEFAULT_MODEL)
FAKE = "tests.training.fake_trainer"


def scored(task_ref: str, resolved: bool, reward: float | None = None) -> Trajectory:
    """A finished two-step trajectory with a verified reward under the current spec."""
    task = Task.objects.filter(task_id=task_ref).first() or TaskFactory.create(task_id=task_ref)
    trajectory = TrajectoryFactory.create(task=task, final_reward=None, success=None, patch=f"p {task_ref} {resolved}")
    StepFactory.create(trajectory=trajectory, step=1, action_type="read_file", action_input="src/config.py")
    StepFactory.create(trajectory=trajectory, step=2, action_type="submit", action_input={}, observation="submitted")
    record_score(trajectory, reward if reward is not None else (1.0 if resolved else 0.0), resolved)
    return trajectory


def verified_set(name: str = "oracle") -> TrainingSet:
    """Two tasks, each with a verified success and a verified failure."""
    for task in ("task_a", "task_b"):
        scored(task, True)
        scored(task, False)
    return build_training_set(name, CurationRule())


def demo_verified_set(name: str = "demo-oracle") -> str:
    """The demo trajectories (needs the demo_suite fixture) with verified outcomes, frozen."""
    trajectories = list(Trajectory.objects.filter(task__isnull=False).order_by("task_ref", "id"))
    for n, trajectory in enumerate(trajectories):
        record_score(trajectory, 1.0 if n % 2 == 0 else -1.0, n % 2 == 0)
    return str(build_training_set(name, CurationRule()))


def config(kind: str = "sft", **sections: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "kind": kind,
        "model": {"base_model": MODEL},
        "rl": {"max_steps": 3, "batch_size": 2, "learning_rate": "1e-5"},
        "data": {"training_set": "oracle"},
        "logging": {"save_every_steps": 2},
    }
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return raw


@pytest.fixture
def fake_trainer(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Point the launcher at the fake trainer (also for worker processes started after this)."""

    def use(mode: str = "ok", step_s: float = 0.05) -> None:
        monkeypatch.setenv("CRUCIBLE_TRAINER_MODULE", FAKE)
        monkeypatch.setenv("CRUCIBLE_TRAINING_LAUNCHER", "python")
        monkeypatch.setenv("FAKE_TRAINER", mode)
        monkeypatch.setenv("FAKE_TRAINER_STEP_S", str(step_s))

    use()
    return use


def wait_for(predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def status_of(run: TrainingRun) -> str:
    return TrainingRun.objects.values_list("status", flat=True).get(pk=run.pk)


def read_config(run: TrainingRun) -> dict[str, Any]:
    return json.loads((Path(run.output_dir).parent / "config.json").read_text())
