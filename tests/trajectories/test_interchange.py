"""Trajectories from SWE-agent, mini-swe-agent and OpenHands import as `imported` and render on the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from tests.factories import TaskFactory
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "interchange"


def imported(name: str, fmt: str, *extra: str) -> Trajectory:
    call_command("import_trajectories", str(FIXTURES / name), "--format", fmt, *extra, verbosity=0)
    return Trajectory.objects.get(task_ref=name.split(".")[0])


def steps_of(trajectory: Trajectory) -> list[tuple[str, object, int | None]]:
    rows = trajectory.steps.order_by("step").values_list("action_type", "action_input", "exit_code")
    return [(kind, given, code) for kind, given, code in rows]


def test_a_swe_agent_traj_imports_with_claims_only_and_renders_its_steps(reviewer_client: Client) -> None:
    TaskFactory.create(task_id="task_0001")
    swe = imported("task_0001.traj", "swe-agent")
    assert swe.source == "imported" and swe.task is not None
    # An exit status is not a reward: nothing is verified until Crucible scores the patch.
    assert swe.final_reward is None and swe.success is None and not swe.claimed
    assert swe.termination == "submitted" and swe.patch.startswith("diff --git a/configkit/config.py")
    assert swe.policy == {"kind": "swe-agent", "model": "gpt-4o-2024-08-06"}
    assert [kind for kind, _, _ in steps_of(swe)] == ["search", "read_file", "run_command", "submit"]
    assert steps_of(swe)[1][1] == {"path": "configkit/config.py"}
    html = reviewer_client.get(f"/trajectories/{swe.trajectory_id}/").content.decode()
    assert html.count('class="step"') == 4
    assert "IndexError: list index out of range" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    call_command("import_trajectories", str(FIXTURES / "task_0001.traj"), "--format", "swe-agent", verbosity=0)
    assert Trajectory.objects.count() == 1  # the same file again adds nothing


def test_a_mini_swe_agent_trajectory_imports_and_renders_its_steps(reviewer_client: Client) -> None:
    TaskFactory.create(task_id="task_0002")
    mini = imported("task_0002.traj.json", "mini-swe-agent")
    assert mini.policy["model"] == "anthropic/claude-sonnet-4-20250514" and mini.termination == "submitted"
    kinds = steps_of(mini)
    assert [kind for kind, _, _ in kinds] == ["read_file", "invalid", "run_command", "submit"]
    assert [code for _, _, code in kinds] == [0, None, 1, None]
    step = mini.steps.get(step=1)
    assert (
        step.observation == "TRUE = ('yes',)\nFALSE = ('no',)"
        and step.thought == "THOUGHT: Let me look at how values are parsed."
    )
    html = reviewer_client.get(f"/trajectories/{mini.trajectory_id}/").content.decode()
    assert html.count('class="step"') == 4 and "1 failed, 4 passed" in html


def test_an_openhands_event_list_imports_as_tool_steps() -> None:
    TaskFactory.create(task_id="task_0003")
    hands = imported("task_0003.json", "openhands")
    assert [kind for kind, _, _ in steps_of(hands)] == ["read_file", "run_command", "edit_file", "submit"]
    assert steps_of(hands)[2][1] == {
        "path": "/workspace/configkit/config.py",
        "old_text": "value = raw",
        "new_text": "value = raw.split('#')[0].strip()",
    }
    assert hands.prompt.startswith("Comments after values") and hands.steps.get(step=2).exit_code == 1


def test_a_bad_foreign_file_is_one_clear_error_and_imports_nothing(tmp_path: Path) -> None:
    TaskFactory.create(task_id="task_0001")
    broken = tmp_path / "task_0001.traj"
    broken.write_text(json.dumps({"trajectory": [{"action": 5}], "info": {}}))
    with pytest.raises(CommandError, match=r"task_0001.traj: trajectory\[0\].action must be a string; nothing"):
        call_command(
            "import_trajectories", str(FIXTURES / "task_0001.traj"), str(broken), "--format", "swe-agent", verbosity=0
        )
    with pytest.raises(CommandError, match="task 'nope' is not in this database"):
        call_command(
            "import_trajectories", str(FIXTURES / "task_0001.traj"), "--format", "swe-agent", "--task-id", "nope"
        )
    with pytest.raises(CommandError, match="not a mini-swe-agent trajectory"):
        call_command("import_trajectories", str(FIXTURES / "task_0001.traj"), "--format", "mini-swe-agent")
    assert Trajectory.objects.count() == 0
