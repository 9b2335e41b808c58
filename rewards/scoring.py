"""Scoring a patch against a task's hidden tests, trusting nothing the agent touched.

Set protected paths aside, apply the rest to a fresh copy of the
base, copy the hidden tests in last, run them in a fresh sandbox, and believe only a
run whose exit code, report and summary agree.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from core.vocabulary import DEFAULT_BACKEND, Detector, Termination
from patches import PatchError, parse
from rewards.admission import Admission, admission_flags, admit
from rewards.anticheat import Flag
from rewards.anticheat.bounded import scan_sources_bounded
from rewards.anticheat.flags import listed
from rewards.behaviour import judge_probes, plant_probes
from rewards.breakdown import Breakdown, ExpectationsPart
from rewards.expectations import Changed
from rewards.held_out import HeldOut, run_calls
from rewards.held_out import judge as judge_held_out
from rewards.independence import Calibration, calibrate, change, function_ids
from rewards.independence import judge as judge_independence
from rewards.spec import RewardSpec
from rewards.workspaces import copy_out, level, mirror, same_tests, test_files, touched_files
from sandbox import Limits, Sandbox, SandboxError, ToolError
from sandbox.backends.base import Backend
from sandbox.results import TestReport
from tasks.lang_tests import PYTHON
from tasks.spec import TaskSpec, copy_hidden_tests, task_environment

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Endings other than a submit: the agent gave up or was stopped, which the outcome penalises.
EARLY_TERMINATIONS = frozenset({Termination.MAX_STEPS, Termination.TIMEOUT, Termination.ERROR})


class PassedOfTotal(TypedDict):
    passed: int
    total: int


class OutcomeCounts(TypedDict):
    fail_to_pass: PassedOfTotal
    pass_to_pass: PassedOfTotal


class ScoreJson(TypedDict):
    """The object `score_patch --json` prints (README, "Reports")."""

    task_id: str
    reward: float
    resolved: bool
    pass_rate: float
    tests: OutcomeCounts
    flags: list[dict[str, Any]]  # Flag.to_json()
    breakdown: Breakdown
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
    breakdown: Breakdown = field(default_factory=lambda: Breakdown())
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


def apply_admitted(box: Sandbox, admission: Admission, flags: list[Flag], breakdown: Breakdown) -> str | None:
    """Apply what admission kept, recording how (or flagging that it does not apply); the method."""
    if not admission.kept:
        return None
    method = _apply(box, admission.kept_text())
    breakdown["applied_with"] = method
    if method is None:
        flags.append(Flag(Detector.PATCH_DOES_NOT_APPLY, "the patch does not apply to the base snapshot"))
    return method


class ScoringError(RuntimeError):
    """Scoring could not reach a verdict (the scorer itself failed): no reward, a clear reason."""


def score_patch(
    task: TaskSpec,
    patch: str,
    spec: RewardSpec,
    backend: Backend | str = DEFAULT_BACKEND,
    termination: str = Termination.SUBMITTED,
    limits: Limits | None = None,
    secret: bytes = b"",
    calibration_cache: Path | None = None,
) -> Score:
    """Score `patch` on `task` under `spec`.

    `secret` keys where canaries and twins are planted, what they are called and how the
    expected values of the second run are changed: the deployment's secret key in the reward
    service, so the same inputs give the same reward and an agent that has read this code still
    cannot predict them. `calibration_cache` keeps each task's calibration (rewards.independence).

    A sandbox that cannot start raises SandboxError; anything else that stops the scorer itself
    raises ScoringError, whose message says so: never a traceback, never a reward.
    """
    try:
        if task.language != PYTHON:
            from rewards.lang_scoring import score_lang_patch  # it imports this module's helpers

            return score_lang_patch(task, patch, spec, backend, termination, limits, secret, calibration_cache)
        if task.verifier is not None:
            from rewards.script_scoring import score_script_patch  # it imports this module's helpers

            return score_script_patch(task, patch, spec, backend, termination, limits)
        return _score(task, patch, spec, backend, termination, limits, secret, calibration_cache)
    except (ScoringError, SandboxError):
        raise
    except Exception as exc:
        logger.exception("scoring of a patch for %s failed", task.task_id)
        raise ScoringError(f"scoring failed: {type(exc).__name__}: {str(exc)[:300]}") from exc


def admit_patch(task: TaskSpec, patch: str, spec: RewardSpec) -> tuple[Admission, list[Flag], Breakdown]:
    """The spec's admission rules on a patch: what may be applied, its flags, and the breakdown's `files`.

    One step for every verifier kind (pytest lists here, scripts in rewards.script_scoring).
    """
    flags: list[Flag] = []
    breakdown: Breakdown = {}
    try:
        admission = admit(
            parse(patch, recount=True),
            task.tests_dest,
            _base_files(task.base_dir),
            spec.admission,
            task.base_dir,
            task.language,
        )
    except PatchError as exc:
        admission = Admission()
        flags.append(Flag(Detector.PATCH_DOES_NOT_APPLY, f"unreadable diff: {exc}"))
    flags += admission_flags(admission)
    breakdown["files"] = {
        "kept": [p.path for p in admission.kept],
        "new_tests_set_aside": [p.path for p in admission.new_tests],
        "protected_set_aside": [p.path for p, _ in admission.protected],
        "refused": [p.path for p, _, _ in admission.refused],
        "decoded_from_binary": admission.decoded,
    }
    return admission, flags, breakdown


def _score(
    task: TaskSpec,
    patch: str,
    spec: RewardSpec,
    backend: Backend | str,
    termination: str,
    limits: Limits | None,
    secret: bytes,
    calibration_cache: Path | None,
) -> Score:
    admission, flags, breakdown = admit_patch(task, patch, spec)
    run_limits = (limits or Limits()).with_timeout(task.timeout_seconds)
    # The calibration depends on the task alone: from the cache, or run once before the candidate's.
    calibration = calibrate(task, task.expected_patch, secret, backend, run_limits, calibration_cache)
    environment = task_environment(task)
    with (
        Sandbox(task.base_dir, backend, limits=run_limits, environment=environment) as box,
        Sandbox(task.base_dir, backend, limits=run_limits, environment=environment) as changed_box,
        Sandbox(task.base_dir, backend, limits=run_limits, environment=environment) as held_out_box,
    ):
        boxes = (box, changed_box, held_out_box)
        if apply_admitted(box, admission, flags, breakdown) is not None:
            touched_paths = sorted({q for f in admission.kept for q in (f.old_path, f.new_path) if q})
            for other in boxes[1:]:
                # The same result as applying again, without a second and third git baseline.
                if not mirror(box.workspace, other.workspace, touched_paths):
                    _apply(other, admission.kept_text())
        # Evidence for people, read from the files as they stand after the patch (lines the base
        # already had are not blamed on the agent), in a bounded child process beside the runs.
        # A copy of the changed files, taken before anything runs: the runs may rewrite them.
        changed_paths = [p.path for p in admission.kept if p.new_path]
        scanned = copy_out(box.workspace, changed_paths)
        static = _in_background(lambda: scan_sources_bounded(Path(scanned.name), changed_paths, base=task.base_dir))
        copy_hidden_tests(box, task)
        # Canaries, sentinel twins and the runner-integrity plugin go into the same run as
        # the hidden tests: what they prove does not depend on reading the patch.
        probes = plant_probes(box.workspace, task, probe_salt(secret, spec, task, patch))
        same_tests(box, changed_box, task)
        changed = change(changed_box.workspace, task, secret)
        for prepared in (box, changed_box):
            level(prepared.workspace)  # no file time tells which of the two runs a process is in
        args = function_ids(probes.args)
        token = hmac.new(secret, b"seal\0" + probe_salt(secret, spec, task, patch), hashlib.sha256).hexdigest()[:24]
        second = _in_background(
            lambda: changed_box.run_tests(args, command=task.test_command, plugins=probes.plugins, seal=token)
        )
        # In a sandbox of its own, holding no expected value: the tests' calls on nearby inputs.
        held_out = calibration.held_out if calibration is not None else HeldOut()
        answers = _in_background(lambda: run_calls(held_out_box, held_out, timeout=_held_out_timeout(task)))
        before = test_files(box.workspace, task)
        report = box.run_tests(args, command=task.test_command, plugins=probes.plugins, seal=token)
        touched = touched_files(box.workspace, before)
        changed_report = second.result()
        held_out_answers = answers.result()  # before the sandboxes close: it runs in one of them
        scan = static.result()
        scanned.cleanup()
    flags += scan.flags
    flags += [
        Flag(Detector.UNREADABLE_SOURCE, f"the static scan could not read it: {why}", rel)
        for rel, why in scan.unparsed.items()
    ]
    if scan.unparsed:
        breakdown["static_unparsed"] = scan.unparsed
    breakdown["probes"] = probes.summary()
    breakdown["expectations"] = _expectations_summary(calibration, changed)
    flags += judge_probes(probes, report)
    flags += [Flag(Detector.FORGED_TEST_RUN, f"the run's results were tampered with: {why}") for why in report.tampered]
    flags += _missing(task, report)
    if touched:
        shown = listed(touched, 5, ", ")
        flags.append(
            Flag(Detector.HIDDEN_TESTS_MISSING, f"hidden test files deleted or changed during the run: {shown}")
        )
    flags += judge_independence(calibration, changed_report, changed)
    if calibration is not None:
        flags += judge_held_out(calibration.held_out, calibration.reference_outputs, held_out_answers)
        breakdown["held_out"] = {"calls": len(calibration.held_out.probes)}
    flags += _second_run_flags(report, changed_report)
    return _reward(task, spec, report, _dedupe(flags), breakdown, termination)


def _in_background(work: Callable[[], T]) -> Future[T]:
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scoring")
    try:
        return pool.submit(work)
    finally:
        pool.shutdown(wait=False)


HELD_OUT_TIMEOUT_S = 60.0


def _held_out_timeout(task: TaskSpec) -> float:
    return float(min(task.timeout_seconds, HELD_OUT_TIMEOUT_S))


def _missing(task: TaskSpec, report: TestReport) -> list[Flag]:
    """Hidden tests that never ran at all, in a run that otherwise finished: something took them away."""
    if not report.valid:
        return []
    ran = set(report.tests)
    absent = [t for t in (*task.fail_to_pass, *task.pass_to_pass) if t not in ran and t.split("[", 1)[0] not in ran]
    if not absent:
        return []
    if report.collection_errors:
        return []  # a module that does not import is a failure of its own, shown as such
    shown = listed(absent, 5, ", ")
    return [Flag(Detector.HIDDEN_TESTS_MISSING, f"{len(absent)} hidden tests never ran: {shown}")]


def _second_run_flags(report: TestReport, changed_report: TestReport) -> list[Flag]:
    """The second run tells what the first did, but for the expected values: a forgery shows in either."""
    flags = [
        Flag(Detector.FORGED_TEST_RUN, f"the second run's results were tampered with: {why}")
        for why in changed_report.tampered
    ]
    if report.valid and not changed_report.valid and not changed_report.exec.timed_out:
        why = "; ".join([*changed_report.inconsistencies, changed_report.unsafe][:2])
        flags.append(Flag(Detector.INCONSISTENT_TEST_RUN, f"the run with changed expected values was not valid: {why}"))
    return flags


def _expectations_summary(calibration: Calibration | None, changed: Changed) -> ExpectationsPart:
    if calibration is None:
        return {"checked": False, "why": "the task has no expected patch to calibrate on"}
    return {
        "checked": bool(calibration.kept),
        "changed": len(calibration.kept),
        "cannot_be_changed": dict(list(calibration.dropped.items())[:50]),
        "changes": [c.to_json() for c in changed.changes[:20]],
    }


def _dedupe(flags: list[Flag]) -> list[Flag]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for flag in flags:
        key = (flag.detector, flag.evidence, flag.path)
        if key not in seen:
            seen.add(key)
            out.append(flag)
    return out


def probe_salt(secret: bytes, spec: RewardSpec, task: TaskSpec, patch: str) -> bytes:
    message = "\0".join((spec.version, task.task_id, hashlib.sha256(patch.encode()).hexdigest())).encode()
    return hmac.new(secret, message, hashlib.sha256).digest()


def policy_bound(reward: float, flags: list[Flag], spec: RewardSpec) -> tuple[float, set[str]]:
    """The reward once the spec's policy for every flag has bounded it, and the policies that applied."""
    hit: set[str] = set()
    for flag in flags:
        policy = spec.policy(flag.detector)
        hit.add(policy)
        if policy == "negative":
            reward = min(reward, spec.negative_value)
        elif policy == "zero":
            reward = min(reward, 0.0)
    return reward, hit


def add_flags(score: Score, flags: list[Flag], spec: RewardSpec) -> None:
    """Flags found after the verdict (from the trajectory's steps, by the reward service) meet the spec's
    policies as the verdict's own did: one pipeline, whichever stage found a flag."""
    if not flags:
        return
    score.flags = [*score.flags, *flags]
    reward, hit = policy_bound(score.reward, flags, spec)
    score.breakdown["policies"] = sorted({*score.breakdown.get("policies", []), *hit})
    if reward < score.reward:
        score.reward = round(reward, 6)
        score.resolved = False


def _reward(
    task: TaskSpec, spec: RewardSpec, report: TestReport, flags: list[Flag], breakdown: Breakdown, termination: str
) -> Score:
    if report.unsafe:
        # Only code in the run can leave a FIFO, a symlink or a huge file where the report goes.
        flags.append(Flag(Detector.UNSAFE_REPORT, report.unsafe))
    if report.exec.timed_out:
        # A timeout explains a missing or partial report; it is its own finding.
        flags.append(Flag(Detector.TIMEOUT, f"the test run passed its {task.timeout_seconds} s limit"))
    else:
        flags += [Flag(Detector.INCONSISTENT_TEST_RUN, problem) for problem in report.inconsistencies]
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
    reward, policies_hit = policy_bound(reward, flags, spec)
    breakdown["policies"] = sorted(policies_hit)
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
