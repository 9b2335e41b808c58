"""Scoring a patch against a task's hidden tests, trusting nothing the agent touched.

DESIGN.md "Rewards": set protected paths aside, apply the rest to a fresh copy of the
base, copy the hidden tests in last, run them in a fresh sandbox, and believe only a
run whose exit code, report and summary agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from core.vocabulary import DEFAULT_BACKEND, Termination
from patches import PatchError, parse
from rewards.anticheat import Flag, scan_equality, scan_patch
from rewards.diffs import Classified, classify
from rewards.spec import RewardSpec
from sandbox import Limits, Sandbox, ToolError
from sandbox.backends.base import Backend
from sandbox.results import TestReport
from tasks.spec import TaskSpec, copy_hidden_tests

# Endings other than a submit: the agent gave up or was stopped, which the outcome penalises.
EARLY_TERMINATIONS = frozenset({Termination.MAX_STEPS, Termination.TIMEOUT, Termination.ERROR})


class PassedOfTotal(TypedDict):
    passed: int
    total: int


class OutcomeCounts(TypedDict):
    fail_to_pass: PassedOfTotal
    pass_to_pass: PassedOfTotal


class ScoreJson(TypedDict):
    """The object `score_patch --json` prints (DESIGN.md CLI contract)."""

    task_id: str
    reward: float
    resolved: bool
    pass_rate: float
    tests: OutcomeCounts
    flags: list[dict[str, Any]]  # Flag.to_json()
    breakdown: dict[str, Any]
    spec_version: str


@dataclass
class Score:
    task_id: str
    reward: float
    resolved: bool
    pass_rate: float
    f2p_passed: int
    f2p_total: int
    p2p_passed: int
    p2p_total: int
    flags: list[Flag] = field(default_factory=list)
    breakdown: dict[str, Any] = field(default_factory=dict)
    spec_version: str = ""

    def to_json(self) -> ScoreJson:
        return {
            "task_id": self.task_id,
            "reward": self.reward,
            "resolved": self.resolved,
            "pass_rate": self.pass_rate,
            "tests": {
                "fail_to_pass": {"passed": self.f2p_passed, "total": self.f2p_total},
                "pass_to_pass": {"passed": self.p2p_passed, "total": self.p2p_total},
            },
            "flags": [f.to_json() for f in self.flags],
            "breakdown": self.breakdown,
            "spec_version": self.spec_version,
        }


def _base_files(base: Path) -> set[str]:
    return {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file() or p.is_symlink()}


def _protection_flags(classified: Classified) -> list[Flag]:
    flags = []
    for patch, why in classified.protected:
        deleted = patch.new_path is None
        detector = "test_deletion" if deleted and why == "existing test file" else "protected_path_edit"
        verb = "deletes" if deleted else "changes"
        flags.append(Flag(detector, f"{verb} {patch.path}: {why}", patch.path))
    return flags


def _apply(box: Sandbox, text: str) -> str | None:
    """Apply with git, then with less context; None when neither applies."""
    for fuzzy, method in ((False, "git apply"), (True, "git apply -C1")):
        try:
            box.apply_patch(text, fuzzy=fuzzy)
            return method
        except ToolError:
            continue
    return None


def score_patch(
    task: TaskSpec,
    patch: str,
    spec: RewardSpec,
    backend: Backend | str = DEFAULT_BACKEND,
    termination: str = Termination.SUBMITTED,
    limits: Limits | None = None,
) -> Score:
    flags: list[Flag] = []
    breakdown: dict[str, Any] = {}
    try:
        classified = classify(parse(patch, recount=True), task.tests_dest, _base_files(task.base_dir))
    except PatchError as exc:
        classified = Classified()
        flags.append(Flag("patch_does_not_apply", f"unreadable diff: {exc}"))
    flags += _protection_flags(classified)
    breakdown["files"] = {
        "kept": [p.path for p in classified.kept],
        "new_tests_set_aside": [p.path for p in classified.new_tests],
        "protected_set_aside": [p.path for p, _ in classified.protected],
    }
    flags += scan_patch(classified.kept)

    run_limits = (limits or Limits()).with_timeout(task.timeout_seconds)
    with Sandbox(task.base_dir, backend, limits=run_limits) as box:
        if classified.kept:
            method = _apply(box, classified.kept_text())
            breakdown["applied_with"] = method
            if method is None:
                flags.append(Flag("patch_does_not_apply", "the patch does not apply to the base snapshot"))
        flags += scan_equality(box.workspace, [p.path for p in classified.kept if p.new_path])
        copy_hidden_tests(box, task)
        report = box.run_tests([*task.fail_to_pass, *task.pass_to_pass], command=task.test_command)
    return _reward(task, spec, report, flags, breakdown, termination)


def _reward(
    task: TaskSpec, spec: RewardSpec, report: TestReport, flags: list[Flag], breakdown: dict[str, Any], termination: str
) -> Score:
    if report.exec.timed_out:
        # A timeout explains a missing or partial report; it is its own finding.
        flags.append(Flag("timeout", f"the test run passed its {task.timeout_seconds} s limit"))
    else:
        flags += [Flag("inconsistent_test_run", problem) for problem in report.inconsistencies]
    valid = report.valid
    f2p = sum(report.outcome(t) == "passed" for t in task.fail_to_pass) if valid else 0
    p2p = sum(report.outcome(t) == "passed" for t in task.pass_to_pass) if valid else 0
    f2p_total, p2p_total = len(task.fail_to_pass), len(task.pass_to_pass)
    pass_rate = f2p / f2p_total if f2p_total else 0.0
    outcome = spec.outcome
    if not valid:
        reward = 0.0
    elif p2p < p2p_total:
        reward = outcome["p2p_break"]
    elif f2p_total and f2p == f2p_total:
        reward = 1.0
    else:
        reward = pass_rate * outcome["lambda_success"]
    breakdown["outcome"] = reward
    if termination in EARLY_TERMINATIONS:
        reward += outcome["early_termination_penalty"]
        breakdown["early_termination"] = outcome["early_termination_penalty"]
    policies_hit = []
    for flag in flags:
        policy = spec.policy(flag.detector)
        policies_hit.append(policy)
        if policy == "negative":
            reward = min(reward, spec.negative_value)
        elif policy == "zero":
            reward = min(reward, 0.0)
    breakdown["policies"] = sorted(set(policies_hit))
    breakdown["tests"] = {t: report.outcome(t) for t in (*task.fail_to_pass, *task.pass_to_pass)}
    breakdown["duration_ms"] = report.exec.duration_ms
    resolved = valid and reward >= 1.0 and f2p == f2p_total and p2p == p2p_total and f2p_total > 0
    return Score(
        task.task_id,
        round(reward, 6),
        resolved,
        round(pass_rate, 6),
        f2p,
        f2p_total,
        p2p,
        p2p_total,
        flags,
        breakdown,
        spec.version,
    )
