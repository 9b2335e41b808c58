"""Process rewards per step (seed §5.2 and the §6.2 pseudo-code), from recorded steps.

The state after each step is read from what the step observed: test summaries,
compile/import errors, linter counts. Reward is per step, clipped; the final
(outcome) reward is scoring's job, not this module's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from core.vocabulary import ActionType
from rewards.anticheat import Flag
from rewards.spec import RewardSpec

COMPILE_ERROR = re.compile(r"\b(SyntaxError|IndentationError|TabError|ImportError|ModuleNotFoundError)\b")
FAILED = re.compile(r"(\d+) (failed|errors?)\b")
PASSED = re.compile(r"(\d+) passed\b")
LINT_FOUND = re.compile(r"Found (\d+) errors?")
LINT_LINE = re.compile(r"^\S+:\d+:\d+: [A-Z]+\d+", re.MULTILINE)
LINTERS = ("ruff", "flake8", "pylint", "pyflakes", "pycodestyle", "mypy")
CHANGES_WORKSPACE = frozenset({ActionType.WRITE_FILE, ActionType.EDIT_FILE})
RUNS_CODE = frozenset({ActionType.RUN_COMMAND, ActionType.RUN_TESTS})
# Actions whose observation only repeats when nothing changed: seeing the same again earns nothing.
LOOKS = frozenset({*RUNS_CODE, ActionType.READ_FILE, ActionType.SEARCH})
RUNS_TESTS = re.compile(r"\bpytest\b|\bunittest\b|\btox\b")
REPEATED_RUNS_FLAG_AT = 3


@dataclass
class State:
    compile_error: bool = False
    failing: int | None = None
    lint: int | None = None


@dataclass
class StepReward:
    step: int
    reward: float
    breakdown: dict[str, float] = field(default_factory=dict)


def _command(step: dict[str, Any]) -> str:
    value = step.get("action_input")
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _is_test_run(step: dict[str, Any]) -> bool:
    return step.get("action_type") == ActionType.RUN_TESTS or (
        step.get("action_type") == ActionType.RUN_COMMAND and bool(RUNS_TESTS.search(_command(step)))
    )


def _failing(observation: str) -> int | None:
    lines = [line for line in observation.splitlines() if PASSED.search(line) or FAILED.search(line)]
    if not lines:
        return None
    return sum(int(n) for n, _ in FAILED.findall(lines[-1]))


def _lint(command: str, observation: str) -> int | None:
    if not any(tool in command for tool in LINTERS):
        return None
    found = LINT_FOUND.search(observation)
    if found:
        return int(found.group(1))
    if "All checks passed" in observation or "Success: no issues" in observation:
        return 0
    return len(LINT_LINE.findall(observation))


def process_rewards(steps: list[dict[str, Any]], spec: RewardSpec) -> tuple[list[StepReward], list[Flag]]:
    weights = spec.process
    low, high = weights["clip"]
    state = State()
    last_seen: dict[str, str] = {}
    since_change = 0
    test_runs_without_change = 0
    flags: list[Flag] = []
    out: list[StepReward] = []
    for step in steps:
        number = int(step.get("step", len(out) + 1))
        action = step.get("action_type", "")
        observation = step.get("observation") or ""
        command = f"{action}:{_command(step)}"
        parts: dict[str, float] = {}
        runs_code = action in RUNS_CODE

        if action in CHANGES_WORKSPACE:
            since_change = 0
            test_runs_without_change = 0
        else:
            since_change += 1

        if runs_code:
            error = bool(COMPILE_ERROR.search(observation))
            if error and not state.compile_error:
                parts["compile_error"] = weights["compile_error"]
            state.compile_error = error
            lint = _lint(_command(step), observation)
            if lint is not None:
                if state.lint is not None and lint < state.lint:
                    parts["lint_down"] = weights["lint_down"]
                state.lint = lint
        if _is_test_run(step):
            test_runs_without_change += 1
            failing = _failing(observation)
            # Only the first run after a change counts: re-running the same tests
            # until a flaky one passes must not pay.
            if failing is not None and test_runs_without_change == 1:
                if state.failing is not None and failing < state.failing:
                    parts["failing_down"] = weights["failing_down_each"] * (state.failing - failing)
                elif state.failing is not None and failing > state.failing:
                    parts["failing_up"] = weights["failing_up"]
                state.failing = failing
            if test_runs_without_change == REPEATED_RUNS_FLAG_AT:
                flags.append(
                    Flag(
                        "repeated_final_test_runs",
                        f"tests run {REPEATED_RUNS_FLAG_AT} times with no change in between",
                        step=number,
                    )
                )
        if action in LOOKS:
            if last_seen.get(command) == observation:
                parts["repeated_command"] = weights["repeated_command"]
            last_seen[command] = observation
        if since_change > weights["no_change_steps"]:
            parts["no_change"] = weights["no_change_penalty"]
        total = max(low, min(high, sum(parts.values())))
        out.append(StepReward(number, round(total, 6), {k: round(v, 6) for k, v in parts.items()}))
    return out, flags
