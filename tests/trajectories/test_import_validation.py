"""Imports refuse junk: action inputs that fit no tool, and trajectories of tasks this store lacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tasks.models import Task
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from tests.helpers import db_state
from trajectories.agent import AgentTask, run_episode
from trajectories.models import Trajectory
from trajectories.policies.base import Message, Policy, PolicyOutput, ToolCall
from trajectories.schema import AgentStep, action_input_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def task_0001(db: None) -> Task:
    import_task_dirs(DEMO / "tasks" / "task_0001", "demo")
    return Task.objects.get(task_id="task_0001")


def write(path: Path, *steps_per_record: list[dict[str, Any]], task_id: str = "task_0001") -> Path:
    path.write_text("".join(json.dumps({"task_id": task_id, "steps": steps}) + "\n" for steps in steps_per_record))
    return path


GOOD_STEPS = [
    {"step": 1, "action_type": "read_file", "action_input": {"path": "configkit/config.py"}},
    {"step": 2, "action_type": "edit_file", "action_input": {"path": "a.py", "old_text": "x", "new_text": "y"}},
    {"step": 3, "action_type": "run_tests", "action_input": {"paths": ["tests/test_parse_config.py"]}},
    {"step": 4, "action_type": "submit", "action_input": {}},
]


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            {"action_type": "edit_file", "action_input": {"path": "a.py", "old_text": "x"}},
            r"line 2: steps\[1\] \(step 2\): action_input.new_text is missing",
        ),
        ({"action_type": "edit_file", "action_input": {"file": "a.py"}}, r"action_input.patch is missing"),
        ({"action_type": "edit_file", "action_input": "a.py"}, r"action_input of edit_file must be an object"),
        ({"action_type": "write_file", "action_input": {"path": "a.py"}}, r"action_input.content is missing"),
        ({"action_type": "read_file", "action_input": {"path": 3}}, r"action_input.path must be a string"),
        ({"action_type": "run_command", "action_input": None}, r"action_input is required for run_command"),
        ({"action_type": "run_command", "action_input": ["ls"]}, r"action_input of run_command must be an object"),
        ({"action_type": "run_tests", "action_input": {"paths": "tests"}}, r"action_input.paths must be a list"),
        ({"action_type": "search", "action_input": {"symbol": None}}, r"action_input.symbol must be a string"),
    ],
)
def test_an_action_input_that_fits_no_tool_is_refused_naming_line_step_and_field(
    tmp_path: Path, task_0001: Task, step: dict[str, Any], message: str
) -> None:
    before = db_state()
    path = write(tmp_path / "bad.jsonl", GOOD_STEPS, [GOOD_STEPS[0], {"step": 2, **step}])
    with pytest.raises(CommandError, match=message) as caught:
        call_command("import_trajectories", str(path), verbosity=0)
    assert "nothing was imported" in str(caught.value)
    assert db_state() == before


def test_the_tool_form_and_the_guides_shorthand_both_import(tmp_path: Path, task_0001: Task) -> None:
    guide = [
        {"step": 1, "action_type": "read_file", "action_input": "src/config.py"},
        {"step": 2, "action_type": "edit_file", "action_input": {"file": "src/config.py", "patch": "..."}},
        {"step": 3, "action_type": "run_tests", "action_input": "pytest tests/test_parse_config.py"},
        {"step": 4, "action_type": "search", "action_input": {"symbol": "parse_config"}},
        {"step": 5, "action_type": "invalid", "action_input": "I think <tool_call>{oops"},
        {"step": 6, "action_type": "submit"},
    ]
    call_command("import_trajectories", str(write(tmp_path / "ok.jsonl", GOOD_STEPS, guide)), verbosity=0)
    assert Trajectory.objects.filter(task=task_0001).count() == 2


def test_a_trajectory_of_an_unknown_task_is_refused_unless_allowed(tmp_path: Path, task_0001: Task) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({"task_id": "task_0001", "steps": GOOD_STEPS})
        + "\n"
        + json.dumps({"task_id": "task_9999", "steps": GOOD_STEPS})
        + "\n"
    )
    before = db_state()
    with pytest.raises(CommandError, match=r"line 2: task 'task_9999' is not in this database.*--allow-unknown-tasks"):
        call_command("import_trajectories", str(path), verbosity=0)
    assert db_state() == before  # not even the good first line

    call_command("import_trajectories", str(path), "--allow-unknown-tasks", verbosity=0)
    stored = {t.task_ref: t for t in Trajectory.objects.all()}
    assert stored["task_0001"].task == task_0001 and stored["task_9999"].task is None


class BadArguments(Policy):
    """A model that names real tools with arguments they cannot take."""

    kind = "scripted"
    calls = [
        ToolCall("edit_file", {"path": "configkit/config.py"}),
        ToolCall("run_tests", {"paths": "tests"}),
        ToolCall("read_file", {"path": "README.md"}),
    ]

    def __init__(self) -> None:
        self.position = 0

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        call = self.calls[self.position]
        self.position += 1
        return PolicyOutput("", call, raw=json.dumps({"name": call.name, "arguments": call.arguments}))


def test_the_agent_records_a_call_with_bad_arguments_as_invalid_so_its_record_imports() -> None:
    steps: list[AgentStep] = []

    class Keep:
        def step(self, record: AgentStep) -> None:
            steps.append(record)

    task = AgentTask(
        task_id="task_0001",
        statement="fix it",
        base_dir=DEMO / "tasks" / "task_0001" / "repo_snapshot",
        max_steps=3,
    )
    run_episode(task, BadArguments(), Keep(), "bwrap")
    assert [s["action_type"] for s in steps] == ["invalid", "invalid", "read_file"]
    assert "action_input.old_text is missing" in steps[0]["observation"]
    assert "action_input.paths must be a list of strings" in steps[1]["observation"]
    assert all(action_input_error(s["action_type"], s["action_input"]) is None for s in steps)
