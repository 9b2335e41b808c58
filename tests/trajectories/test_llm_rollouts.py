"""Real rollouts with the bundled model: in-process (hf) and through `transformers serve` (openai).

Failing the task is fine; a broken record is not. Every trajectory must end with a
termination reason, steps numbered 1..n with known action types, and export as a line
that our own import accepts.
"""

from __future__ import annotations

import json

import pytest

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from trajectories.batches import start_batch
from trajectories.exports import iter_trajectory_lines
from trajectories.model_server import ModelServer
from trajectories.models import Trajectory
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory
from trajectories.schema import ACTION_TYPES, check_record

MAX_STEPS = 2  # two model turns show a multi-step record; each more is seconds of CPU


def one_task_suite() -> TaskSuite:
    import_task_dirs(DEMO / "tasks" / "task_0001", "llm")
    return TaskSuite.objects.get(name="llm")


def assert_well_formed(trajectory: Trajectory) -> None:
    assert trajectory.status == "finished", trajectory.error
    assert trajectory.termination in ("submitted", "max_steps", "timeout")
    steps = list(trajectory.steps.order_by("step"))
    assert 1 <= len(steps) <= MAX_STEPS and [s.step for s in steps] == list(range(1, len(steps) + 1))
    assert all(s.action_type in ACTION_TYPES and s.observation for s in steps)
    line = next(iter_trajectory_lines(Trajectory.objects.filter(pk=trajectory.pk)))
    record = check_record(json.loads(line), 1, line)
    assert record["policy"]["temperature"] == 0.7 and record["task_version"].startswith("sha256:")


@pytest.mark.django_db
def test_the_bundled_model_completes_a_real_rollout_in_process(model_dir: str) -> None:
    batch = start_batch(
        one_task_suite(),
        RolloutSettings("hf", model_dir, max_steps=MAX_STEPS, temperature=0.7, max_new_tokens=64),
        enqueue=False,
    )
    trajectory = run_trajectory(batch.trajectories.get().pk)
    assert trajectory is not None
    assert trajectory.policy["kind"] == "hf" and trajectory.policy["checkpoint"]
    assert_well_formed(trajectory)
    # The local policy keeps the ids it sampled and the prompt it sampled them from, for the
    # episodes export (trajectories.interchange.episodes) to use instead of tokenizing again.
    for step in trajectory.steps.all():
        call = step.extra["model"]
        assert len(call["prompt_token_ids"]) == call["prompt_tokens"] and call["prompt_tokens"] > 0
        assert len(call["completion_token_ids"]) == call["completion_tokens"]


@pytest.mark.django_db
def test_an_openai_compatible_server_drives_a_real_rollout(model_server: ModelServer) -> None:
    batch = start_batch(
        one_task_suite(),
        RolloutSettings(
            "openai",
            model_server.model,
            base_url=model_server.base_url,
            max_steps=MAX_STEPS,
            temperature=0.7,
            max_new_tokens=64,
        ),
        enqueue=False,
    )
    trajectory = run_trajectory(batch.trajectories.get().pk)
    assert trajectory is not None
    assert trajectory.policy["kind"] == "openai", model_server.log_tail()
    assert_well_formed(trajectory)
