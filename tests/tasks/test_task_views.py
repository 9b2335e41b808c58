"""A task reaches the agent and the scorer one way, whichever way it came in: a stored Task, a
task directory on disk, or a directory copied into the store all give the same TaskSpec, and the
agent's view of it is made from that spec alone."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from tasks.models import Task
from tasks.services import import_task_dirs, task_spec_for, task_spec_from_dir
from tasks.spec import TaskSpec
from trajectories.agent import EPISODE_TIMEOUTS, AgentTask
from trajectories.runner import agent_task

DEMO = Path(__file__).resolve().parents[2] / "demo" / "tasks"
SAME = ("task_id", "fail_to_pass", "pass_to_pass", "tests_dest", "test_command", "timeout_seconds", "environment",
        "environment_error", "expected_patch", "statement", "visible_tests")  # fmt: skip


def _fields(spec: TaskSpec) -> dict[str, object]:
    return {name: getattr(spec, name) for name in SAME}


@pytest.mark.django_db
def test_a_stored_task_a_task_directory_and_a_stored_copy_give_the_same_spec() -> None:
    import_task_dirs(DEMO / "task_0003", "views")
    stored = task_spec_for(Task.objects.get(task_id="task_0003"))
    on_disk = TaskSpec.from_task_dir(DEMO / "task_0003")
    copied = task_spec_from_dir(DEMO / "task_0003")
    assert _fields(stored) == _fields(on_disk) == _fields(copied)
    assert stored.statement.strip() and stored.visible_tests == on_disk.visible_tests


@pytest.mark.django_db
def test_the_agent_sees_a_stored_task_as_it_sees_its_directory() -> None:
    import_task_dirs(DEMO / "task_0003", "views")
    from_row = agent_task(Task.objects.get(task_id="task_0003"), max_steps=7)
    from_dir = AgentTask.of(TaskSpec.from_task_dir(DEMO / "task_0003"), max_steps=7)
    assert dataclasses.replace(from_row, base_dir=Path(".")) == dataclasses.replace(from_dir, base_dir=Path("."))
    assert from_row.timeout_seconds == from_row.command_timeout * EPISODE_TIMEOUTS and from_row.max_steps == 7


def test_a_task_directory_scored_from_the_store_keeps_its_environment(tmp_path: Path) -> None:
    task_dir = tmp_path / "task_0003"
    shutil.copytree(DEMO / "task_0003", task_dir)
    meta = json.loads((task_dir / "metadata.json").read_text())
    meta["environment"] = {"python": "3.11", "requirements": ["iniconfig==2.0.0"]}
    (task_dir / "metadata.json").write_text(json.dumps(meta))
    spec = task_spec_from_dir(task_dir)
    assert spec.environment is not None and spec.environment == TaskSpec.from_task_dir(task_dir).environment
