"""Scoring a patch on a Go or JavaScript (Vitest) task (tasks.lang_tests): the pytest path's rules,
with the task's own runner.

The admission rules are the pytest tasks' own (rewards.admission). The kept rest goes onto a
fresh copy of the base in a fresh sandbox, the hidden tests are copied in last, the runner files
(`go.mod`, `package.json`, the lock) are put back as the base has them, and the listed tests run
with `run_go_tests` / `run_js_tests`. The reward is `rewards.scoring`'s: a run it cannot believe
earns nothing, a broken PASS_TO_PASS test the spec's `p2p_break`, every FAIL_TO_PASS test passing
1. The changed Go or JavaScript files are read for what a patch to such a task may not do to its
run (rewards.anticheat.lang_scan: forged framing, the framework's globals replaced, always-equal
methods, code that reads the tests, runner configuration), and those flags meet the spec's
policies as the Python scan's do. What the pytest reward adds besides (sentinels, twins, the
second run with changed expected values, held-out calls) is pytest's: not applied here, and the
breakdown says so.
"""

from __future__ import annotations

from concurrent.futures import Future
from contextlib import ExitStack
from pathlib import Path, PurePosixPath

from core.vocabulary import Detector, Termination
from rewards.anticheat import Flag
from rewards.anticheat.flags import listed
from rewards.anticheat.lang_config import scan_runner_config
from rewards.anticheat.lang_scan import scan_lang_sources
from rewards.breakdown import ExpectationsPart
from rewards.lang_expectations import (
    MAX_CHANGES_SHOWN,
    ChangedTests,
    cached_calibration,
    calibrated,
    calibration_key,
    change_hidden_tests,
    judge,
    remember_calibration,
    write_changed,
)
from rewards.scoring import (
    Score,
    _apply,
    _dedupe,
    _in_background,
    _missing,
    _reward,
    _second_run_flags,
    admit_patch,
    apply_admitted,
)
from rewards.spec import RewardSpec
from rewards.workspaces import touched_files
from sandbox import Limits, Sandbox, SandboxError
from sandbox.backends.base import Backend
from sandbox.lang_run import check_backend
from sandbox.results import Outcome, TestReport
from tasks.lang_tests import (
    check_runner,
    hidden_digests,
    refused_report,
    restore_runner_files,
    run_language_tests,
    runner_name,
    scoring_ids,
)
from tasks.spec import TaskSpec, copy_hidden_tests

NOT_APPLIED = "sentinels, twins and held-out calls are pytest's"


def score_lang_patch(
    task: TaskSpec,
    patch: str,
    spec: RewardSpec,
    backend: Backend | str,
    termination: str = Termination.SUBMITTED,
    limits: Limits | None = None,
    secret: bytes = b"",
    calibration_cache: Path | None = None,
) -> Score:
    admission, flags, breakdown = admit_patch(task, patch, spec)
    run_limits = (limits or Limits()).with_timeout(task.timeout_seconds)
    check_runner(task)  # no toolchain on this host is the scorer's failure, never a zero
    changed_tests = change_hidden_tests(task.tests_dir, task.tests_dest, task.language, secret, task.task_id)
    key = calibration_key(task, secret)
    known = cached_calibration(key, calibration_cache)
    with ExitStack() as stack:
        box = stack.enter_context(Sandbox(task.base_dir, backend, limits=run_limits))
        check_backend(box.backend)  # only bwrap runs them: a host's setting, never the patch's doing
        method = apply_admitted(box, admission, flags, breakdown)
        # Read as the patch left them: the runner files are put back from the base below.
        changed = [p.path for p in admission.kept if p.new_path]
        flags += scan_lang_sources(box.workspace, task.base_dir, changed, task.language, task.tests_dest)
        every = [*admission.kept, *admission.new_tests, *(p for p, _ in admission.protected)]
        flags += scan_runner_config(every, box.workspace, task.base_dir, task.language, _hidden_paths(task))
        second: Future[TestReport] | None = None
        reference: Future[TestReport] | None = None
        if changed_tests.files and task.expected_patch.strip():
            # The same patch on the tests with their expected values changed, beside the real run, and,
            # once per task, the expected patch on them (the calibration): which FAIL_TO_PASS tests
            # check what was changed.
            changed_box = stack.enter_context(Sandbox(task.base_dir, backend, limits=run_limits))
            if method is not None:
                _apply(changed_box, admission.kept_text())
            _prepare(task, changed_box, changed_tests)
            second = _in_background(lambda: _run(task, changed_box, run_limits))
            if known is None:
                reference_box = stack.enter_context(Sandbox(task.base_dir, backend, limits=run_limits))
                if _apply(reference_box, task.expected_patch) is not None:
                    _prepare(task, reference_box, changed_tests)
                    reference = _in_background(lambda: _run(task, reference_box, run_limits))
        restored = _prepare(task, box)
        before = hidden_digests(box.workspace, task)
        report = _run(task, box, run_limits)
        touched = touched_files(box.workspace, before)
        changed_report = second.result() if second is not None else None
        reference_report = reference.result() if reference is not None else None
    breakdown["lang"] = {
        "language": task.language,
        "runner": runner_name(task),  # chosen from the base's package.json, never the patch's
        "restored_from_base": restored,
        "not_applied": NOT_APPLIED,
    }
    flags += [Flag(Detector.FORGED_TEST_RUN, f"the run's results were tampered with: {why}") for why in report.tampered]
    flags += _missing(task, report)
    if touched:
        shown = listed(touched, 5, ", ")
        flags.append(
            Flag(Detector.HIDDEN_TESTS_MISSING, f"hidden test files deleted or changed during the run: {shown}")
        )
    kept = known
    if reference_report is not None:
        kept = calibrated(reference_report, task.fail_to_pass)
        remember_calibration(key, kept, calibration_cache)
    if kept and changed_report is not None and any(changed_report.passed(t) for t in kept):
        kept = _confirmed(task, backend, run_limits, changed_tests, kept)
        remember_calibration(key, kept, calibration_cache)
    breakdown["expectations"] = _expectations(task, changed_tests, kept)
    if kept and changed_report is not None:
        flags += judge(kept, changed_report, changed_tests)
        flags += _second_run_flags(report, changed_report)
    return _reward(task, spec, report, _dedupe(flags), breakdown, termination)


def _confirmed(
    task: TaskSpec, backend: Backend | str, limits: Limits, changed: ChangedTests, kept: list[str]
) -> list[str]:
    """The calibrated tests the expected patch fails again with their expected values changed.

    Asked only before accusing a patch: a test that failed the calibration run for another reason (a
    timing test on a loaded host: tough-cookie's "should set a timestamp ...") would otherwise make
    the expected patch itself an answer oracle. A test the expected patch now passes checks nothing
    reliably and is dropped; one that fails again stands, whatever the patch being scored did.
    """
    with Sandbox(task.base_dir, backend, limits=limits) as box:
        if _apply(box, task.expected_patch) is None:
            return kept
        _prepare(task, box, changed)
        again = _run(task, box, limits)
    if not again.valid or again.collection_errors:
        return kept  # nothing learnt: the calibration stands
    return [t for t in kept if again.outcome(t) == Outcome.FAILED]


def _prepare(task: TaskSpec, box: Sandbox, changed: ChangedTests | None = None) -> list[str]:
    """The hidden tests into a patched workspace (changed, when given), the base's runner files; those put back."""
    copy_hidden_tests(box, task)
    if changed is not None:
        write_changed(box.workspace, changed)
    return restore_runner_files(box.workspace, task.base_dir, task.language)


def _run(task: TaskSpec, box: Sandbox, limits: Limits) -> TestReport:
    try:
        return run_language_tests(task, box.workspace, scoring_ids(task), box.backend, limits)
    except SandboxError as exc:
        # Refused for what the patched workspace holds (a package it removed, a node_modules it planted).
        return refused_report(str(exc))


def _expectations(task: TaskSpec, changed: ChangedTests, kept: list[str] | None) -> ExpectationsPart:
    if not changed.files:
        return {"checked": False, "why": "no expected value in the hidden tests could be changed"}
    if kept is None:
        return {"checked": False, "why": "the task has no expected patch that applies to calibrate on"}
    why = "the expected patch does not fail it with its expected values changed"
    return {
        "checked": bool(kept),
        "changed": len(kept),
        "cannot_be_changed": {t: why for t in task.fail_to_pass if t not in kept},
        "changes": [e.to_json() for e in changed.edits[:MAX_CHANGES_SHOWN]],
    }


def _hidden_paths(task: TaskSpec) -> list[str]:
    """Where the hidden test files go in the workspace."""
    dest = PurePosixPath(task.tests_dest)
    found = (p for p in task.tests_dir.rglob("*") if p.is_file())
    return [(dest / p.relative_to(task.tests_dir).as_posix()).as_posix() for p in found]
