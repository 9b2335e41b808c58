"""The agent loop on its own: what it tells a recorder, and how it ends when the sandbox breaks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.vocabulary import ActionType, Termination
from sandbox import Sandbox, SandboxError
from tests.conftest import DEMO
from trajectories.agent import AgentTask, run_episode
from trajectories.policies.base import Message, Policy, PolicyOutput, ToolCall
from trajectories.schema import AgentStep, hash_test_id
from trajectories.tools import run_tool


class Scripted(Policy):
    kind = "test"

    def __init__(self, *calls: ToolCall | None) -> None:
        self.calls = list(calls)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        call = self.calls.pop(0) if self.calls else ToolCall("submit", {})
        return PolicyOutput("thinking", call, error=None if call else "no tool call in the reply")


class Collect:
    def __init__(self) -> None:
        self.records: list[AgentStep] = []

    def step(self, record: AgentStep) -> None:
        self.records.append(record)


def demo_task(**overrides: Any) -> AgentTask:
    base = DEMO / "tasks" / "task_0001" / "repo_snapshot"
    return AgentTask(task_id="task_0001", statement="fix it", base_dir=base, **overrides)


def test_an_agent_task_is_built_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        AgentTask("task_0001", "fix it", Path("."))  # type: ignore[misc]


def test_the_recorder_gets_each_step_with_its_timings_and_the_episode_ends_on_submit() -> None:
    recorder = Collect()
    episode = run_episode(demo_task(), Scripted(ToolCall("read_file", {"path": "README.md"}), None), recorder)
    assert episode.termination == Termination.SUBMITTED and episode.steps == 3
    kinds = [r["action_type"] for r in recorder.records]
    assert kinds == [ActionType.READ_FILE, ActionType.INVALID, ActionType.SUBMIT]
    assert "no tool call in the reply" in recorder.records[1]["observation"]
    assert all(r["duration_ms"] is not None and r["policy_ms"] >= 0 for r in recorder.records)


def test_a_patch_lost_with_a_broken_sandbox_is_logged_not_hidden(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from sandbox.core import Sandbox

    def broken_diff(self: Sandbox) -> str:
        raise SandboxError("workspace vanished")

    monkeypatch.setattr(Sandbox, "diff", broken_diff)
    episode = run_episode(demo_task(), Scripted(ToolCall("submit", {})), Collect())
    assert episode.termination == Termination.ERROR and episode.patch == ""
    assert "task_0001: no patch could be read" in caplog.text and "workspace vanished" in caplog.text


def test_a_run_tests_step_carries_the_harness_counts_and_a_command_never_does(task_dir: Path) -> None:
    repo = task_dir / "repo_snapshot"
    (repo / "tests" / "test_empty.py").write_text(
        "from configkit import parse_config\n\n\ndef test_empty():\n    assert parse_config('') == {}\n"
    )
    recorder = Collect()
    printed = ToolCall("run_command", {"command": "echo '40 failed'; python -m pytest -q tests/test_values.py"})
    run = ToolCall("run_tests", {"paths": ["tests/test_parse_config.py", "tests/test_empty.py"]})
    run_episode(AgentTask(task_id="task_0001", statement="fix it", base_dir=repo), Scripted(printed, run), recorder)
    command, tests = recorder.records[0], recorder.records[1]
    assert "40 failed" in command["observation"] and "harness_tests" not in command
    counts = tests["harness_tests"]
    assert (counts["failed"], counts["errors"], counts["valid"], counts["ids_complete"]) == (1, 0, True, True)
    assert counts["passed"] == len(counts["passed_ids"]) == 4
    assert counts["failed_ids"] == [hash_test_id("tests/test_empty.py::test_empty")]


@pytest.mark.parametrize("paths", [["-p", "evil_plugin"], ["--deselect=tests/test_a.py::test_x"], ["-k", "not hard"]])
def test_the_agents_run_tests_cannot_pass_options_to_the_harness(paths: list[str]) -> None:
    with Sandbox(DEMO / "tasks" / "task_0001" / "repo_snapshot") as box:
        result = run_tool(box, "run_tests", {"paths": paths}, [], 60)
    assert "not options" in result.observation
    assert result.harness_tests is None
