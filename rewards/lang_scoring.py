"""Scoring a patch on a Go or JavaScript (Vitest) task (tasks.lang_tests): the pytest path's rules,
with the task's own runner.

The admission rules are the pytest tasks' own (rewards.admission). The kept rest goes onto a
fresh copy of the base in a fresh sandbox, the hidden tests are copied in last, the runner files
(`go.mod`, `package.json`, the lock) are put back as the base has them, and the listed tests run
with `run_go_tests` / `run_js_tests`. The reward is `rewards.scoring`'s: a run it cannot believe
earns nothing, a broken PASS_TO_PASS test the spec's `p2p_break`, every FAIL_TO_PASS test passing
1. What the pytest reward adds (sentinels, twins, the second run with changed expected values,
held-out calls, the static scan) is pytest's and Python's: not applied here, and the breakdown
says so.
"""

from __future__ import annotations

from core.vocabulary import Detector, Termination
from rewards.anticheat import Flag
from rewards.anticheat.flags import listed
from rewards.scoring import Score, _dedupe, _missing, _reward, admit_patch, apply_admitted
from rewards.spec import RewardSpec
from rewards.workspaces import touched_files
from sandbox import Limits, Sandbox, SandboxError
from sandbox.backends.base import Backend
from sandbox.lang_run import check_backend
from tasks.lang_tests import (
    check_runner,
    hidden_digests,
    refused_report,
    restore_runner_files,
    run_language_tests,
    scoring_ids,
)
from tasks.spec import TaskSpec, copy_hidden_tests

NOT_APPLIED = "sentinels, twins, changed expected values, held-out calls and the static scan are pytest's"


def score_lang_patch(
    task: TaskSpec,
    patch: str,
    spec: RewardSpec,
    backend: Backend | str,
    termination: str = Termination.SUBMITTED,
    limits: Limits | None = None,
) -> Score:
    admission, flags, breakdown = admit_patch(task, patch, spec)
    run_limits = (limits or Limits()).with_timeout(task.timeout_seconds)
    check_runner(task)  # no toolchain on this host is the scorer's failure, never a zero
    with Sandbox(task.base_dir, backend, limits=run_limits) as box:
        check_backend(box.backend)  # only bwrap runs them: a host's setting, never the patch's doing
        apply_admitted(box, admission, flags, breakdown)
        copy_hidden_tests(box, task)
        restored = restore_runner_files(box.workspace, task.base_dir, task.language)
        before = hidden_digests(box.workspace, task)
        try:
            report = run_language_tests(task, box.workspace, scoring_ids(task), box.backend, run_limits)
        except SandboxError as exc:
            # Refused for what the patched workspace holds (a package it removed, a node_modules it planted).
            report = refused_report(str(exc))
        touched = touched_files(box.workspace, before)
    breakdown["lang"] = {"language": task.language, "restored_from_base": restored, "not_applied": NOT_APPLIED}
    flags += [Flag(Detector.FORGED_TEST_RUN, f"the run's results were tampered with: {why}") for why in report.tampered]
    flags += _missing(task, report)
    if touched:
        shown = listed(touched, 5, ", ")
        flags.append(
            Flag(Detector.HIDDEN_TESTS_MISSING, f"hidden test files deleted or changed during the run: {shown}")
        )
    return _reward(task, spec, report, _dedupe(flags), breakdown, termination)
