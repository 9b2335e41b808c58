from __future__ import annotations

import json
import shutil
from collections.abc import Set
from pathlib import Path
from typing import Any

import pytest

from rewards.process import process_rewards
from rewards.spec import SpecError, load_spec, parse_spec
from tests.conftest import DEMO
from tests.factories import TrajectoryFactory
from tests.helpers import running_lease
from trajectories.agent import AgentTask, run_episode
from trajectories.models import Trajectory
from trajectories.policies.base import Message, Policy, PolicyOutput, ToolCall
from trajectories.recorder import DBRecorder
from trajectories.schema import HARNESS_TESTS, HarnessTests, check_record, hash_test_id

SPEC = load_spec()


def step(n: int, action: str, action_input: object = "", observation: str = "") -> dict[str, object]:
    return {"step": n, "action_type": action, "action_input": action_input, "observation": observation}


def harness(failing: Set[str], passing: Set[str], valid: bool = True) -> HarnessTests:
    return {
        "passed": len(passing),
        "failed": len(failing),
        "errors": 0,
        "skipped": 0,
        "collected": len(failing) + len(passing),
        "valid": valid,
        "failed_ids": sorted(hash_test_id(t) for t in failing),
        "passed_ids": sorted(hash_test_id(t) for t in passing),
        "ids_complete": True,
    }


def harness_run(n: int, failing: Set[str], passing: Set[str] = frozenset(), valid: bool = True) -> dict[str, Any]:
    """A run_tests step as Crucible's recorder stores it: the harness's counts in `extra`."""
    summary = f"{len(failing)} failed, {len(passing)} passed in 0.1s"
    return {**step(n, "run_tests", {}, summary), "extra": {HARNESS_TESTS: harness(failing, passing, valid)}}


def names(prefix: str, count: int) -> set[str]:
    return {f"tests/test_x.py::{prefix}{i}" for i in range(count)}


def rewards_of(steps: list[dict[str, object]]) -> dict[int, dict[str, float]]:
    rewards, _ = process_rewards(steps, SPEC)
    return {r.step: r.breakdown for r in rewards}


def test_the_guide_signals_each_move_the_step_reward() -> None:
    a, b, c, d, e, f, g = "abcdefg"
    got = rewards_of(
        [
            harness_run(1, {a, b, c, d, e}, {f, g}),
            step(2, "edit_file", {"file": "a.py"}),
            harness_run(3, {d, e}, {a, b, c, f, g}),
            step(4, "edit_file", {"file": "a.py"}),
            step(5, "run_command", "python -c 'import a'", "SyntaxError: invalid syntax"),
            harness_run(6, {b, c, d, e}, {a, f, g}),
        ]
    )
    assert got[3] == {"failing_down": pytest.approx(0.6)}
    assert got[5] == {"compile_error": -0.5}
    assert got[6] == {"failing_up": -0.2}


def test_fewer_lint_errors_printed_by_a_command_earn_nothing() -> None:
    got = rewards_of(
        [
            step(1, "run_command", "ruff check .", "Found 7 errors."),
            step(2, "edit_file", {"file": "a.py"}),
            step(3, "run_command", "echo ruff; echo 'Found 2 errors.'", "ruff\nFound 2 errors."),
        ]
    )
    assert got[3] == {}


def test_repeating_a_command_with_the_same_output_costs_and_only_the_first_test_run_counts() -> None:
    steps = [harness_run(1, {"a", "b", "c"}), step(2, "edit_file", {"file": "a.py"})]
    steps += [harness_run(n, {"a"} if n % 2 else {"a", "b"}, {"b", "c"} if n % 2 else {"c"}) for n in range(3, 8)]
    rewards, flags = process_rewards(steps, SPEC)
    by_step = {r.step: r for r in rewards}
    assert by_step[3].breakdown == {"failing_down": pytest.approx(0.4)}
    assert all("failing_down" not in by_step[n].breakdown for n in range(4, 8))  # flaky luck does not pay
    assert [f.detector for f in flags] == ["repeated_final_test_runs"]
    again = rewards_of([step(1, "read_file", "a.py", "x"), step(2, "read_file", "a.py", "x")])
    assert again[2] == {"repeated_command": -0.1}


def test_idling_without_changing_the_workspace_is_penalised_and_rewards_are_clipped() -> None:
    idle = rewards_of([step(n, "read_file", f"f{n}.py", "x") for n in range(1, 14)])
    assert "no_change" not in idle[10] and idle[11] == {"no_change": -0.1}
    clipped, _ = process_rewards(
        [harness_run(1, names("t", 40)), step(2, "edit_file", {}), harness_run(3, set(), names("t", 40))], SPEC
    )
    assert clipped[2].reward == 1.0 and clipped[2].breakdown["failing_down"] == pytest.approx(8.0)


ECHO_FARM = [
    s
    for n in range(0, 20, 4)
    for s in (
        step(n + 1, "edit_file", {"file": "a.py"}),
        step(n + 2, "run_command", "echo '40 failed' # pytest", "40 failed"),
        step(n + 3, "edit_file", {"file": "a.py"}),
        step(n + 4, "run_command", "echo '1 passed' # pytest", "1 passed"),
    )
]


def test_echo_farmed_test_counts_earn_nothing() -> None:
    # Scored from the printed counts, these 20 steps earned +3.8 with no flag.
    farmed, _ = process_rewards(ECHO_FARM, SPEC)
    assert sum(r.reward for r in farmed) <= 0
    assert not any(r.reward > 0 or "failing_down" in r.breakdown for r in farmed)
    # The same text as the observation of run_tests steps with no harness record behind it.
    as_tool = [{**s, "action_type": "run_tests"} if s["action_type"] == "run_command" else s for s in ECHO_FARM]
    farmed, _ = process_rewards(as_tool, SPEC)
    assert not any(r.reward > 0 for r in farmed)


def test_an_imported_trajectory_claiming_harness_counts_gets_no_test_count_reward() -> None:
    edit = {"path": "a.py", "old_text": "a", "new_text": "b"}  # an import checks each step's input
    claimed = [harness_run(1, names("t", 40)), step(2, "edit_file", edit), harness_run(3, set(), names("t", 40))]
    line = json.dumps(
        {
            "task_id": "task_0001",
            "steps": [{k: v for k, v in s.items() if k != "extra"} | s.get("extra", {}) for s in claimed],
        }
    ).encode()
    record = check_record(json.loads(line), 1, line)
    assert all(HARNESS_TESTS not in s["extra"] for s in record["steps"])
    assert record["steps"][0]["extra"]["claimed_harness_tests"]["failed"] == 40  # kept, as a claim
    imported, _ = process_rewards([dict(s) for s in record["steps"]], SPEC)
    assert not any(r.reward > 0 for r in imported)


def test_breaking_and_fixing_tests_again_or_fixing_tests_of_its_own_pays_nothing_more() -> None:
    farm = [harness_run(1, {"real"}, {"other"}), step(2, "edit_file", {}), harness_run(3, set(), {"real", "other"})]
    for n in range(4, 28, 4):
        # Break the real test and add 50 failing tests of its own, then "fix" everything.
        farm += [step(n, "write_file", {}), harness_run(n + 1, {"real", *names("mine", 50)}, {"other"})]
        farm += [step(n + 2, "write_file", {}), harness_run(n + 3, set(), {"real", "other", *names("mine", 50)})]
    rewards = {r.step: r for r in process_rewards(farm, SPEC)[0]}
    assert rewards[3].breakdown == {"failing_down": pytest.approx(0.2)}
    assert all("failing_down" not in r.breakdown for n, r in rewards.items() if n > 3)
    assert sum(r.reward for r in rewards.values()) < 0


def test_a_run_that_leaves_the_failing_tests_out_does_not_count_them_fixed() -> None:
    got = rewards_of([harness_run(1, {"bug"}, {"ok"}), step(2, "edit_file", {}), harness_run(3, set(), {"ok"})])
    assert got[3] == {}


@pytest.mark.parametrize(
    "before", [step(1, "edit_file", {}), step(1, "run_command", "echo 'def test_x(): assert 0' > tests/test_x.py")]
)
def test_without_a_run_on_the_untouched_workspace_nothing_is_paid(before: dict[str, object]) -> None:
    got = rewards_of(
        [before, harness_run(2, names("t", 5)), step(3, "edit_file", {}), harness_run(4, set(), names("t", 5))]
    )
    assert "failing_down" not in got[4]


def test_a_harness_run_whose_report_disagrees_with_its_exit_code_counts_as_no_run() -> None:
    got = rewards_of(
        [harness_run(1, names("t", 5)), step(2, "edit_file", {}), harness_run(3, set(), names("t", 5), valid=False)]
    )
    assert got[3] == {}


class Scripted(Policy):
    kind = "test"

    def __init__(self, *calls: ToolCall) -> None:
        self.calls = list(calls)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        return PolicyOutput("", self.calls.pop(0) if self.calls else ToolCall("submit", {}))


THREE_EMPTY_INPUTS = """from configkit import parse_config


def test_empty_string():
    assert parse_config("") == {}


def test_empty_after_strip():
    assert parse_config("   ".strip()) == {}


def test_empty_join():
    assert parse_config("".join([])) == {}
"""


@pytest.mark.django_db
def test_an_honest_trajectory_earns_failing_down_from_the_harness_record_of_its_own_runs(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(DEMO / "tasks" / "task_0001" / "repo_snapshot", repo)
    (repo / "tests" / "test_three.py").write_text(THREE_EMPTY_INPUTS)
    run = ToolCall("run_tests", {"paths": ["tests/test_three.py"]})
    fix = ToolCall(
        "edit_file",
        {
            "path": "configkit/config.py",
            "old_text": "if lines[0].startswith(",
            "new_text": "if lines and lines[0].startswith(",
        },
    )
    trajectory = TrajectoryFactory.create()
    episode = run_episode(
        AgentTask(task_id="task_0001", statement="fix it", base_dir=repo),
        Scripted(run, fix, run),
        DBRecorder(trajectory, running_lease(trajectory)),
    )
    assert episode.steps == 4
    stored = list(
        Trajectory.objects.get(pk=trajectory.pk)
        .steps.order_by("step")
        .values("step", "action_type", "action_input", "observation", "extra")
    )
    assert stored[0]["extra"][HARNESS_TESTS]["failed"] == 3 and stored[2]["extra"][HARNESS_TESTS]["failed"] == 0
    rewards = {r.step: r for r in process_rewards([dict(s) for s in stored], SPEC)[0]}
    assert rewards[3].breakdown == {"failing_down": pytest.approx(0.6)}


def test_the_spec_is_versioned_by_content_and_checked(tmp_path: Path) -> None:
    assert SPEC.version.startswith("guide-default@")
    assert parse_spec({"outcome": {"lambda_success": 0.5}}).version != SPEC.version
    assert parse_spec({}).version == SPEC.version
    for bad, message in [
        ({"outcome": {"lambda_success": "x"}}, "outcome.lambda_success"),
        ({"process": {"clip": [1, -1]}}, "process.clip"),
        ({"anticheat": {"policies": {"eq_override": "ignore"}}}, "must be one of"),
        ({"anticheat": {"policies": {"telepathy": "zero"}}}, "unknown detector"),
        (["not", "a", "mapping"], "must be a mapping"),
    ]:
        with pytest.raises(SpecError, match=message):
            parse_spec(bad)
    broken = tmp_path / "spec.yaml"
    broken.write_text("outcome: [unclosed\n")
    with pytest.raises(SpecError):
        load_spec(broken)


def test_a_review_policy_flags_without_changing_the_reward() -> None:
    lenient = parse_spec({"anticheat": {"policies": {"eq_override": "review"}}})
    assert lenient.policy("eq_override") == "review" and SPEC.policy("eq_override") == "negative"
