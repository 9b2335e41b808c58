"""The agent loop: prompt, policy, tool call, sandbox, observation, until a stop.

Plain Python (no Django): a Celery job, the `rollout` command and a training process
drive it the same way, each with its own Recorder for where the steps go.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from core.vocabulary import DEFAULT_BACKEND, ActionType, Termination
from sandbox import Limits, Sandbox, SandboxError
from sandbox.backends.base import Backend
from sandbox.environments import Environment
from tasks.lang_tests import GO, JAVASCRIPT, PYTHON
from tasks.spec import TaskSpec, task_environment
from trajectories.lang_runs import LanguageRunner
from trajectories.policies.base import CANCELLED, Message, Policy, PolicyError, ToolCall
from trajectories.schema import AgentStep, action_input_error
from trajectories.tools import TOOL_ACTION_TYPES, TOOLS, bound, run_tool

logger = logging.getLogger(__name__)

_PROMPT = """You are a software engineer fixing a bug in {repository}.
You work through tools: read files, search, edit or write files, run commands and tests.
Call exactly one tool per reply. When the repository is fixed, call submit.
The repository is your current directory; there is no network.{tests}"""
# What the system prompt says of each language's repository and of how run_tests runs its tests.
# Python's adds nothing: its prompt is the one every recorded Python trajectory was made with.
_LANGUAGE_PROMPTS = {
    PYTHON: ("a Python repository", ""),
    GO: (
        "a Go repository (a Go module)",
        "\nrun_tests runs its Go tests with go test: give package folders, _test.go files or "
        "<import path>::<TestName> ids, or nothing for every package with tests.",
    ),
    JAVASCRIPT: (
        "a JavaScript/TypeScript repository",
        "\nrun_tests runs its *.test.* and *.spec.* files with the repository's JavaScript test runner: "
        "give test files, folders or <file>::<describe> > <test> ids, or nothing for all of them.",
    ),
}


def system_prompt(language: str = PYTHON) -> str:
    """The system prompt of a task in `language` (tasks.lang_tests): it names the language and how
    the tests run. Training data built from a trajectory must use the same (trajectories.conversation)."""
    repository, tests = _LANGUAGE_PROMPTS.get(language, _LANGUAGE_PROMPTS[PYTHON])
    return _PROMPT.format(repository=repository, tests=tests)


SYSTEM_PROMPT = system_prompt(PYTHON)


# An episode may take this many times the task's test timeout, all its steps together.
EPISODE_TIMEOUTS = 5


@dataclass(kw_only=True)
class AgentTask:
    """What the agent loop needs of a task: made from a TaskSpec by `of`, the one way in."""

    task_id: str
    statement: str
    base_dir: Path
    visible_tests: list[str] = field(default_factory=list)
    max_steps: int = 30
    timeout_seconds: float = 600.0  # the whole episode
    command_timeout: float = 60.0
    # The repository's built environment (tasks.spec.task_environment); None: the bare runner.
    environment: Environment | None = None
    # A Go or JavaScript task's test runner for run_tests (trajectories.lang_runs); None: pytest.
    runner: LanguageRunner | None = None

    @property
    def language(self) -> str:
        return self.runner.language if self.runner is not None else PYTHON

    @classmethod
    def of(cls, task: TaskSpec, max_steps: int, episode_timeouts: float = EPISODE_TIMEOUTS) -> AgentTask:
        """The agent's view of `task`, its environment built now if this host has none yet
        (SandboxError if it cannot be, or if this host cannot run a Go or JavaScript task's tests)."""
        return cls(
            task_id=task.task_id,
            statement=task.statement,
            base_dir=task.base_dir,
            visible_tests=list(task.visible_tests),
            max_steps=max_steps,
            timeout_seconds=float(task.timeout_seconds) * episode_timeouts,
            command_timeout=float(task.timeout_seconds),
            environment=task_environment(task),
            runner=LanguageRunner.of(task),
        )


class Recorder(Protocol):
    def step(self, record: AgentStep) -> None: ...


@dataclass
class Episode:
    termination: Termination
    patch: str
    steps: int
    sandbox: dict[str, Any]
    error: str = ""
    sandbox_ms: float = 0.0
    policy_ms: float = 0.0

    @property
    def cancelled(self) -> bool:
        return self.error == CANCELLED


def prompt(task: AgentTask) -> list[Message]:
    return [Message("system", system_prompt(task.language)), Message("user", task.statement)]


def run_episode(
    task: AgentTask,
    policy: Policy,
    recorder: Recorder,
    backend: Backend | str = DEFAULT_BACKEND,
    limits: Limits | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Episode:
    messages = prompt(task)
    started = time.monotonic()
    termination, error = Termination.MAX_STEPS, ""
    sandbox_ms = policy_ms = 0.0
    steps = 0
    with Sandbox(task.base_dir, backend, limits=limits, environment=task.environment) as box:
        info: dict[str, Any] = {"backend": box.backend.name, "prepare_ms": box.prepare_ms}
        try:
            for number in range(1, task.max_steps + 1):
                if should_stop():
                    termination, error = Termination.ERROR, CANCELLED
                    break
                if time.monotonic() - started > task.timeout_seconds:
                    termination = Termination.TIMEOUT
                    break
                output = policy.act(messages, TOOLS)
                policy_ms += output.latency_ms
                step_started = time.perf_counter()
                record, call, step_sandbox_ms = take_step(
                    box, task, number, output.tool_call, output.thought, output.raw, output.error
                )
                record["duration_ms"] = round((time.perf_counter() - step_started) * 1000 + output.latency_ms, 3)
                record["policy_ms"] = round(output.latency_ms, 3)
                model_call = output.model_call()
                if model_call is not None:
                    record["model"] = model_call
                sandbox_ms += step_sandbox_ms
                recorder.step(record)
                steps = number
                messages += turn_messages(call, output.thought, record["observation"], number)
                if record["action_type"] == ActionType.SUBMIT:
                    termination = Termination.SUBMITTED
                    break
            patch = box.diff()
        except (PolicyError, SandboxError) as exc:
            termination, error = Termination.ERROR, str(exc)
            patch = _safe_diff(box, task)
        info["startup_ms"] = box.startup_ms
    return Episode(termination, patch, steps, info, error, round(sandbox_ms, 3), round(policy_ms, 3))


def _safe_diff(box: Sandbox, task: AgentTask) -> str:
    try:
        return box.diff()
    except Exception:  # noqa: BLE001 - the episode already failed; the patch is best effort
        logger.warning("task %s: no patch could be read from the failed episode's sandbox", task.task_id, exc_info=True)
        return ""


def take_step(
    box: Sandbox, task: AgentTask, number: int, call: ToolCall | None, thought: str, raw: str, error: str | None
) -> tuple[AgentStep, ToolCall | None, float]:
    """The step's record (timings filled in by the caller), the call it made, and its sandbox time.

    The loop here and the environment server (envserver) both take their steps through it, so a
    call made by an outside trainer is run and recorded exactly as a rollout's.
    """
    stamp = datetime.now(UTC)
    problem = None
    if call is not None and call.name in TOOL_ACTION_TYPES:
        # A call the record's schema would refuse (missing or mistyped arguments) is recorded as
        # invalid, so every trajectory Crucible records imports back (trajectories.schema).
        problem = action_input_error(TOOL_ACTION_TYPES[call.name], _action_input(call))
    if call is None or call.name not in TOOL_ACTION_TYPES or problem is not None:
        if call is None:
            reason = error or "no tool call"
        elif problem is not None:
            reason = f"{call.name}'s arguments: action_input{problem}"
        else:
            reason = f"unknown tool {call.name!r}"
        observation = f"error: {reason}. Reply with exactly one tool call; tools: {', '.join(TOOL_ACTION_TYPES)}."
        raw_text, _ = bound(raw or thought, 4000)
        return (
            {
                "step": number,
                "action_type": ActionType.INVALID,
                "action_input": raw_text,
                "observation": observation,
                "observation_truncated": False,
                "thought": thought,
                "timestamp": stamp,
                "exit_code": None,
                "duration_ms": None,
                "policy_ms": 0.0,
            },
            # The model still sees the call it made, answered by what was wrong with it.
            call if problem is not None else None,
            0.0,
        )
    result = run_tool(box, call.name, call.arguments, task.visible_tests, task.command_timeout, task.runner)
    action_input = _action_input(call)
    record: AgentStep = {
        "step": number,
        "action_type": TOOL_ACTION_TYPES[call.name],
        "action_input": action_input,
        "observation": result.observation,
        "observation_truncated": result.truncated,
        "thought": thought,
        "timestamp": stamp,
        "exit_code": result.exit_code,
        "duration_ms": None,
        "policy_ms": 0.0,
    }
    if result.harness_tests is not None:
        record["harness_tests"] = result.harness_tests
    return record, call, result.sandbox_ms


def _action_input(call: ToolCall) -> Any:
    return call.arguments if call.name != "search_symbol" else {"symbol": call.arguments.get("name")}


def turn_messages(call: ToolCall | None, thought: str, observation: str, number: int) -> list[Message]:
    """One step as chat messages: the assistant's call (or text) and the observation it got."""
    if call is None:
        return [Message("assistant", thought), Message("user", observation)]
    call_id = f"call_{number}"
    placed = ToolCall(call.name, call.arguments, call_id)
    return [
        Message("assistant", thought, tool_calls=[placed]),
        Message("tool", observation, tool_call_id=call_id, name=call.name),
    ]
