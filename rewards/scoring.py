"""Scoring a patch against a task's hidden tests, trusting nothing the agent touched.

DESIGN.md "Rewards": set protected paths aside, apply the rest to a fresh copy of the
base, copy the hidden tests in last, run them in a fresh sandbox, and believe only a
run whose exit code, report and summary agree.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from core.vocabulary import DEFAULT_BACKEND, Termination
from patches import PatchError, parse
from rewards.admission import Admission, admission_flags, admit
from rewards.anticheat import Flag, scan_sources
from rewards.behaviour import judge_probes, plant_probes
from rewards.spec import RewardSpec
from sandbox import Limits, Sandbox, ToolError
from sandbox.backends.base import Backend
from sandbox.results import TestReport
from tasks.spec import TaskSpec, copy_hidden_tests, task_environment

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
    secret: bytes = b"",
) -> Score:
    """Score `patch` on `task` under `spec`.

    `secret` keys where canaries and twins are planted and what they are called: the
    deployment's secret key in the reward service, so the same inputs give the same reward
    and an agent that has read this code still cannot predict them.
    """
    flags: list[Flag] = []
    breakdown: dict[str, Any] = {}
    try:
        admission = admit(
            parse(patch, recount=True), task.tests_dest, _base_files(task.base_dir), spec.admission, task.base_dir
        )
    except PatchError as exc:
        admission = Admission()
        flags.append(Flag("patch_does_not_apply", f"unreadable diff: {exc}"))
    flags += admission_flags(admission)
    breakdown["files"] = {
        "kept": [p.path for p in admission.kept],
        "new_tests_set_aside": [p.path for p in admission.new_tests],
        "protected_set_aside": [p.path for p, _ in admission.protected],
        "refused": [p.path for p, _, _ in admission.refused],
        "decoded_from_binary": admission.decoded,
    }

    run_limits = (limits or Limits()).with_timeout(task.timeout_seconds)
    with Sandbox(task.base_dir, backend, limits=run_limits, environment=task_environment(task)) as box:
        if admission.kept:
            method = _apply(box, admission.kept_text())
            breakdown["applied_with"] = method
            if method is None:
                flags.append(Flag("patch_does_not_apply", "the patch does not apply to the base snapshot"))
        # Evidence for people, read from the files as they stand after the patch; lines the
        # base already had are not blamed on the agent.
        static = scan_sources(box.workspace, [p.path for p in admission.kept if p.new_path], base=task.base_dir)
        flags += static.flags
        if static.unparsed:
            breakdown["static_unparsed"] = static.unparsed
        copy_hidden_tests(box, task)
        # Canaries, sentinel twins and the runner-integrity plugin go into the same run as
        # the hidden tests: what they prove does not depend on reading the patch.
        probes = plant_probes(box.workspace, task, probe_salt(secret, spec, task, patch))
        report = box.run_tests(probes.args, command=task.test_command, plugins=probes.plugins)
    breakdown["probes"] = probes.summary()
    flags += judge_probes(probes, report)
    return _reward(task, spec, report, flags, breakdown, termination)


def probe_salt(secret: bytes, spec: RewardSpec, task: TaskSpec, patch: str) -> bytes:
    message = "\0".join((spec.version, task.task_id, hashlib.sha256(patch.encode()).hexdigest())).encode()
    return hmac.new(secret, message, hashlib.sha256).digest()


def _reward(
    task: TaskSpec, spec: RewardSpec, report: TestReport, flags: list[Flag], breakdown: dict[str, Any], termination: str
) -> Score:
    if report.unsafe:
        # Only code in the run can leave a FIFO, a symlink or a huge file where the report goes.
        flags.append(Flag("unsafe_report", report.unsafe))
    if report.exec.timed_out:
        # A timeout explains a missing or partial report; it is its own finding.
        flags.append(Flag("timeout", f"the test run passed its {task.timeout_seconds} s limit"))
    else:
        flags += [Flag("inconsistent_test_run", problem) for problem in report.inconsistencies]
    valid = report.valid
    breakdown["test_run_valid"] = valid  # learned components (rewards.learned) apply only then
    f2p = sum(report.passed(t) for t in task.fail_to_pass) if valid else 0
    p2p = sum(report.passed(t) for t in task.pass_to_pass) if valid else 0
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
