"""A trained policy checkpoint served through `transformers serve` drives an `openai` rollout."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.vocabulary import CheckpointKind
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from tests.training.trainer_support import make_tiny_model
from training.models import Checkpoint
from training.serving import policy_checkpoint, serve_checkpoint
from trajectories.batches import start_batch
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory

pytestmark = pytest.mark.django_db


def test_a_served_checkpoint_is_the_policy_of_an_openai_rollout(tmp_path: Path) -> None:
    path = make_tiny_model(tmp_path / "policy")
    checkpoint = Checkpoint.objects.create(name="sft-step-2", kind=CheckpointKind.POLICY, path=str(path))
    import_task_dirs(DEMO / "tasks" / "task_0001", "served")

    with serve_checkpoint(policy_checkpoint("sft-step-2")) as server:
        batch = start_batch(
            TaskSuite.objects.get(name="served"),
            RolloutSettings(
                "openai", server.model, base_url=server.base_url, max_steps=2, temperature=0.0, max_new_tokens=16
            ),
            enqueue=False,
        )
        trajectory = run_trajectory(batch.trajectories.get().pk)

    assert trajectory is not None and trajectory.status == "finished", trajectory and trajectory.error
    assert trajectory.policy["kind"] == "openai" and trajectory.policy["checkpoint"] == checkpoint.path
    assert 1 <= trajectory.steps.count() <= 2  # the untrained model may only babble: still recorded steps


def test_only_an_existing_policy_checkpoint_can_be_served(tmp_path: Path) -> None:
    Checkpoint.objects.create(name="rm", kind=CheckpointKind.REWARD, path=str(tmp_path))
    Checkpoint.objects.create(name="gone", kind=CheckpointKind.POLICY, path=str(tmp_path / "missing"))
    for ref, message in (
        ("nope", "no checkpoint 'nope'"),
        ("rm", "is a reward model; only policy checkpoints generate"),
        ("gone", "no model at"),
    ):
        with pytest.raises(CommandError, match=message):
            call_command("serve_checkpoint", ref)
