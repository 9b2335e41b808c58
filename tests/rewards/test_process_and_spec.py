from __future__ import annotations

from pathlib import Path

import pytest

from rewards.process import process_rewards
from rewards.spec import SpecError, load_spec, parse_spec

SPEC = load_spec()


def step(n: int, action: str, action_input: object = "", observation: str = "") -> dict[str, object]:
    return {"step": n, "action_type": action, "action_input": action_input, "observation": observation}


def rewards_of(steps: list[dict[str, object]]) -> dict[int, dict[str, float]]:
    rewards, _ = process_rewards(steps, SPEC)
    return {r.step: r.breakdown for r in rewards}


def test_the_guide_signals_each_move_the_step_reward() -> None:
    got = rewards_of(
        [
            step(1, "run_tests", "pytest", "5 failed, 2 passed in 0.1s"),
            step(2, "edit_file", {"file": "a.py"}),
            step(3, "run_tests", "pytest", "2 failed, 5 passed in 0.1s"),
            step(4, "edit_file", {"file": "a.py"}),
            step(5, "run_command", "python -c 'import a'", "SyntaxError: invalid syntax"),
            step(6, "run_tests", "pytest", "4 failed, 3 passed in 0.1s"),
            step(7, "run_command", "ruff check .", "Found 7 errors."),
            step(8, "edit_file", {"file": "a.py"}),
            step(9, "run_command", "ruff check .", "Found 2 errors."),
        ]
    )
    assert got[3] == {"failing_down": pytest.approx(0.6)}
    assert got[5] == {"compile_error": -0.5}
    assert got[6] == {"failing_up": -0.2}
    assert got[9] == {"lint_down": 0.1}


def test_repeating_a_command_with_the_same_output_costs_and_only_the_first_test_run_counts() -> None:
    steps = [step(1, "run_tests", "pytest", "3 failed in 0.1s"), step(2, "edit_file", {"file": "a.py"})]
    steps += [step(n, "run_tests", "pytest", f"{1 if n % 2 else 2} failed in 0.1s") for n in range(3, 8)]
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
        [
            step(1, "run_tests", "pytest", "40 failed in 1s"),
            step(2, "edit_file", {}),
            step(3, "run_tests", "pytest", "1 passed in 1s"),
        ],
        SPEC,
    )
    assert clipped[2].reward == 1.0 and clipped[2].breakdown["failing_down"] == pytest.approx(8.0)


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
