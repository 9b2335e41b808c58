"""The agent loop: prompt, policy, tool call, sandbox, observation, until a stop.

Plain Python (no Django): a Celery job, the `rollout` command and a training process
drive it the same way, each with its own Recorder for where the steps go.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from sandbox import Limits, Sandbox, SandboxError
from sandbox.backends.base import Backend
from trajectories.policies.base import Message, Policy, PolicyError, ToolCall
from trajectories.tools import TOOL_ACTION_TYPES, TOOLS, bound, run_tool

SYSTEM_PROMPT = """You are a software engineer fixing a bug in a Python repository.
You work through tools: read files, search, edit or write files, run commands and tests.
Call exactly one tool per reply. When the repository is fixed, call submit.
The repository is your current directory; there is no network."""


@dataclass
class AgentTask:
    task_id: str
    statement: str
    base_dir: Path
    version: str = ""
    base_commit: str = ""
    visible_tests: list[str] = field(default_factory=list)
    max_steps: int = 30
    timeout_seconds: float = 600.0  # the whole episode
    command_timeout: float = 60.0


class Recorder(Protocol):
    def step(self, record: dict[str, Any]) -> None: ...


@dataclass
class Episode:
    termination: str  # submitted | max_steps | timeout | error
    patch: str
    steps: int
    sandbox: dict[str, Any]
    error: str = ""
    sandbox_ms: float = 0.0
    policy_ms: float = 0.0


def prompt(task: AgentTask) -> list[Message]:
    return [Message("system", SYSTEM_PROMPT), Message("user", task.statement)]


def run_episode(task: AgentTask, policy: Policy, recorder: Recorder, backend: Backend | str = "bwrap",
                limits: Limits | None = None, should_stop: Callable[[], bool] = lambda: False) -> Episode:
    messages = prompt(task)
    started = time.monotonic()
    termination, error = "max_steps", ""
    sandbox_ms = policy_ms = 0.0
    steps = 0
    with Sandbox(task.base_dir, backend, limits=limits) as box:
        info: dict[str, Any] = {"backend": box.backend.name, "prepare_ms": box.prepare_ms}
        try:
            for number in range(1, task.max_steps + 1):
                if should_stop():
                    termination, error = "error", "cancelled"
                    break
                if time.monotonic() - started > task.timeout_seconds:
                    termination = "timeout"
                    break
                output = policy.act(messages, TOOLS)
                policy_ms += output.latency_ms
                step_started = time.perf_counter()
                record, call = _step(box, task, number, output.tool_call, output.thought, output.raw, output.error)
                record["duration_ms"] = round((time.perf_counter() - step_started) * 1000 + output.latency_ms, 3)
                record["policy_ms"] = round(output.latency_ms, 3)
                sandbox_ms += record.pop("sandbox_ms")
                recorder.step(record)
                steps = number
                messages += _conversation(call, output.thought, record["observation"], number)
                if call is not None and call.name == "submit":
                    termination = "submitted"
                    break
            patch = box.diff()
        except (PolicyError, SandboxError) as exc:
            termination, error = "error", str(exc)
            patch = _safe_diff(box)
        info["startup_ms"] = box.startup_ms
    return Episode(termination, patch, steps, info, error, round(sandbox_ms, 3), round(policy_ms, 3))


def _safe_diff(box: Sandbox) -> str:
    try:
        return box.diff()
    except Exception:  # noqa: BLE001 - the episode already failed; the patch is best effort
        return ""


def _step(box: Sandbox, task: AgentTask, number: int, call: ToolCall | None, thought: str, raw: str,
          error: str | None) -> tuple[dict[str, Any], ToolCall | None]:
    stamp = datetime.now(UTC)
    if call is None or call.name not in TOOL_ACTION_TYPES:
        reason = (error or "no tool call") if call is None else f"unknown tool {call.name!r}"
        observation = (f"error: {reason}. Reply with exactly one tool call; tools: {', '.join(TOOL_ACTION_TYPES)}.")
        raw_text, _ = bound(raw or thought, 4000)
        return ({"step": number, "action_type": "invalid", "action_input": raw_text, "observation": observation,
                 "observation_truncated": False, "thought": thought, "timestamp": stamp, "exit_code": None,
                 "sandbox_ms": 0.0}, None)
    result = run_tool(box, call.name, call.arguments, task.visible_tests, task.command_timeout)
    action_input: Any = call.arguments if call.name != "search_symbol" else {"symbol": call.arguments.get("name")}
    return ({"step": number, "action_type": TOOL_ACTION_TYPES[call.name], "action_input": action_input,
             "observation": result.observation, "observation_truncated": result.truncated, "thought": thought,
             "timestamp": stamp, "exit_code": result.exit_code, "sandbox_ms": result.sandbox_ms}, call)


def _conversation(call: ToolCall | None, thought: str, observation: str, number: int) -> list[Message]:
    if call is None:
        return [Message("assistant", thought), Message("user", observation)]
    call_id = f"call_{number}"
    placed = ToolCall(call.name, call.arguments, call_id)
    return [Message("assistant", thought, tool_calls=[placed]),
            Message("tool", observation, tool_call_id=call_id, name=call.name)]
