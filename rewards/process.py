"""Process rewards per step (docs/formats.md "Reward spec"), from recorded steps.

Nothing an agent can print moves a reward up. Failing tests are read only from what the
harness read from its own report of a `run_tests` step (HarnessTests in the step's
`extra`, written by Crucible's recorder; an imported file cannot supply them). And a test
earns "failing down" only if it failed in the baseline, the first harness run before the
agent could change anything (before any write, edit or command), and passes in a later
run, once per test: tests the agent writes, breaks or leaves out of a run are not fixes,
so writing 1000 failing tests and then fixing them, or breaking and re-fixing tests,
earns nothing. With no such baseline (the agent changed the workspace before running the
tests) nothing is paid. Signals read from observed text (a new compile/import error, a
repeated command, idling) only ever cost. No "fewer lint errors" credit is paid: there is
no harness-run linter, and a linter's output from `run_command` is text an agent can print
(`echo 'Found 7 errors.'`) or produce with a fake linter on the path.
Reward is per step, clipped; the final (outcome) reward is scoring's job, not this module's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from core.vocabulary import ActionType, Detector
from rewards.anticheat import Flag
from rewards.spec import RewardSpec
from trajectories.schema import HARNESS_TESTS

COMPILE_ERROR = re.compile(r"\b(SyntaxError|IndentationError|TabError|ImportError|ModuleNotFoundError)\b")
HARNESS_COUNTS = ("passed", "failed", "errors", "skipped", "collected")
CHANGES_WORKSPACE = frozenset({ActionType.WRITE_FILE, ActionType.EDIT_FILE})
# What can change the workspace at all (a command can write files): after one, no baseline.
MAY_CHANGE_WORKSPACE = frozenset({*CHANGES_WORKSPACE, ActionType.RUN_COMMAND})
RUNS_CODE = frozenset({ActionType.RUN_COMMAND, ActionType.RUN_TESTS})
# Actions whose observation only repeats when nothing changed: seeing the same again earns nothing.
LOOKS = frozenset({*RUNS_CODE, ActionType.READ_FILE, ActionType.SEARCH})
RUNS_TESTS = re.compile(r"\bpytest\b|\bunittest\b|\btox\b")
REPEATED_RUNS_FLAG_AT = 3


@dataclass
class State:
    compile_error: bool = False
    failing: int | None = None
    untouched: bool = True  # no step so far could have changed the workspace
    baseline: set[str] | None = None  # tests failing in the first harness run on the untouched workspace
    fixed: set[str] = field(default_factory=set)  # baseline tests already paid for


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


@dataclass(frozen=True)
class HarnessRun:
    failing: int
    failed_ids: frozenset[str] | None  # None when the step kept counts only
    passed_ids: frozenset[str] | None


def _harness_run(step: dict[str, Any]) -> HarnessRun | None:
    """A run_tests step's harness record; None without one (an imported step, a command's output).

    A run whose exit code, report and summary disagree proves nothing, so it counts as no run.
    """
    if step.get("action_type") != ActionType.RUN_TESTS:
        return None
    extra = step.get("extra")
    record = extra.get(HARNESS_TESTS) if isinstance(extra, dict) else None
    if not isinstance(record, dict) or record.get("valid") is not True:
        return None
    counts = [record.get(key) for key in HARNESS_COUNTS]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts):
        return None
    failing = int(record["failed"]) + int(record["errors"])
    failed, passed = record.get("failed_ids"), record.get("passed_ids")
    if record.get("ids_complete") is not True or not isinstance(failed, list) or not isinstance(passed, list):
        return HarnessRun(failing, None, None)
    if not all(isinstance(i, str) for i in (*failed, *passed)):
        return HarnessRun(failing, None, None)
    return HarnessRun(failing, frozenset(failed), frozenset(passed))


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
        if action in MAY_CHANGE_WORKSPACE:
            state.untouched = False

        if runs_code:
            error = bool(COMPILE_ERROR.search(observation))
            if error and not state.compile_error:
                parts["compile_error"] = weights["compile_error"]
            state.compile_error = error
        if _is_test_run(step):
            test_runs_without_change += 1
            run = _harness_run(step)
            if run is not None and state.baseline is None and state.untouched and run.failed_ids is not None:
                state.baseline = set(run.failed_ids)
            # Only the first run after a change counts: re-running the same tests
            # until a flaky one passes must not pay.
            elif run is not None and test_runs_without_change == 1:
                if state.baseline is not None and run.passed_ids is not None:
                    fixed = (state.baseline & run.passed_ids) - state.fixed
                    if fixed:
                        parts["failing_down"] = weights["failing_down_each"] * len(fixed)
                        state.fixed |= fixed
                if state.failing is not None and run.failing > state.failing:
                    parts["failing_up"] = weights["failing_up"]
            if run is not None:
                state.failing = run.failing
            if test_runs_without_change == REPEATED_RUNS_FLAG_AT:
                flags.append(
                    Flag(
                        Detector.REPEATED_FINAL_TEST_RUNS,
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
