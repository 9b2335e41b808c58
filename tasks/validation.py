"""Task validation: executable, reproducible, context complete, safe, licensed.

Plain Python over a TaskSpec (no Django), so a worker or a script can run it; the
result is a report with a status and the evidence for every reason.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from license_expression import get_spdx_licensing

from patches import PatchError, parse
from sandbox import Limits
from sandbox.backends.base import Backend
from sandbox.environments import EnvBuildError, ensure_environment
from sandbox.names import DEFAULT_BACKEND
from tasks import safety
from tasks.builders import statements
from tasks.lang_tests import PYTHON
from tasks.script_validation import script_checks
from tasks.secrets import live, scan_secrets, summary
from tasks.spec import TaskSpec
from tasks.validation_runs import VALIDATION_ARGS as VALIDATION_ARGS  # the bench runs what validation runs
from tasks.validation_runs import Check, Runner, reward_separates, stable_lists
from tasks.validation_runs import selected_files as selected_files

if TYPE_CHECKING:
    from tasks import strength

logger = logging.getLogger(__name__)

# Repository paths a statement points the agent at: anything with a directory part, or
# a Python module. A bare "local.cfg" is usually the user's file, not the repo's.
PATH_TOKEN = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.\w+|[\w-]+\.py)\b")
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
LICENSE_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "COPYING", "COPYING.txt")
LICENSE_SIGNATURES = [
    ("MIT", "Permission is hereby granted, free of charge"),
    ("Apache-2.0", "Apache License"),
    ("BSD-3-Clause", "Neither the name of"),
    ("BSD-2-Clause", "Redistribution and use in source and binary forms"),
    ("GPL-3.0-or-later", "GNU GENERAL PUBLIC LICENSE"),
    ("ISC", "Permission to use, copy, modify, and/or distribute this software"),
    ("Unlicense", "This is free and unencumbered software released into the public domain"),
]


@dataclass(frozen=True)
class Thresholds:
    """What a task must reach beyond passing its checks, set by whoever validates.

    `min_test_strength` None: test strength is not measured (it costs one hidden-test run per
    mutant and rewrite, tasks.strength); 0: measured and reported, never blocking.
    """

    min_statement_quality: float = 0.0
    min_test_strength: float | None = None

    def __post_init__(self) -> None:
        for name, value in (("statement quality", self.min_statement_quality), ("strength", self.min_test_strength)):
            if value is not None and not 0 <= value <= 1:
                raise ValueError(f"the minimum {name} must be between 0 and 1")


NO_THRESHOLDS = Thresholds()


@dataclass
class ValidationReport:
    status: str  # valid | flaky | invalid
    checks: list[Check]
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    flaky: list[str]
    license: str | None
    needs_review: bool
    runs: int
    test_seconds: float
    # tasks.builders.statements.StatementQuality: shown on the task page, a threshold if asked for.
    statement_quality: dict[str, Any] = field(default_factory=dict)
    # tasks.strength.Strength's JSON when measured (score, mutants, survivors, brittle), else {}.
    test_strength: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["reasons"] = [c.reason for c in self.checks if not c.ok]
        return data


def detect_license(snapshot: Path, declared: str, allowlist: list[str]) -> tuple[Check, str | None]:
    """SPDX id from the licence file (or the declared field), checked against the allowlist."""
    found = None
    for name in LICENSE_FILES:
        path = snapshot / name
        if path.is_file():
            text = path.read_text(errors="replace")[:20000]
            found = next((spdx for spdx, needle in LICENSE_SIGNATURES if needle.lower() in text.lower()), None)
            break
    if found is None and declared:
        licensing = get_spdx_licensing()
        if not licensing.validate(declared).errors:
            found = licensing.parse(declared).render()
    if found is None:
        return Check("licensed", False, "no licence found: a person must decide whether it may be used"), None
    if found not in allowlist:
        return Check("licensed", False, f"licence {found} is not on the allowlist", [found]), found
    return Check("licensed", True, evidence=[found]), found


def check_context(
    task: TaskSpec, statement: str, expected_patch: str, base_commit: str, tests_are_given: bool = False
) -> list[Check]:
    snapshot_files = {p.relative_to(task.base_dir).as_posix() for p in task.base_dir.rglob("*") if p.is_file()}
    # Tracebacks shorten paths ("…/pkg/mod.py", "../pkg/mod.py"): match on the tail.
    named = sorted({re.sub(r"^(\.+/)+", "", m) for m in PATH_TOKEN.findall(statement)} - {""})
    missing = [p for p in named if not any(f == p or f.endswith("/" + p) for f in snapshot_files)]
    checks = [
        Check(
            "context_complete",
            not missing,
            f"the statement names files the snapshot lacks: {', '.join(missing)}" if missing else "",
            missing,
        )
    ]
    leaks: list[str] = []
    try:
        file_patches = parse(expected_patch, recount=True)
    except PatchError as exc:
        # The executable check already fails for a patch git cannot apply; only the line leak check is lost.
        logger.warning("validation: the expected patch of %s is not a readable diff: %s", task.task_id, exc)
        file_patches = []
    for patch in file_patches:
        for _, line in patch.added_lines():
            stripped = line.strip()
            if len(stripped) >= 20 and stripped in statement:
                leaks.append(f"patch line: {stripped[:120]}")
    # An error-log task's statement is the failing run itself: naming the test is the point.
    for node in () if tests_are_given else (*task.fail_to_pass, *task.pass_to_pass):
        name = node.split("::")[-1].split("[")[0]
        if len(name) > 5 and re.search(rf"\b{re.escape(name)}\b", statement):
            leaks.append(f"test name: {name}")
    if (
        base_commit
        and len(base_commit) >= 7
        and any(base_commit.startswith(h) or h.startswith(base_commit) for h in HEX.findall(statement.lower()))
    ):
        leaks.append(f"commit hash: {base_commit}")
    checks.append(
        Check("no_leak", not leaks, "the statement leaks the answer: " + "; ".join(leaks[:5]) if leaks else "", leaks)
    )
    return checks


def validate(
    task: TaskSpec,
    statement: str,
    expected_patch: str,
    *,
    base_commit: str = "",
    declared_license: str = "",
    source: str = "",
    license_allowlist: list[str],
    runs: int = 5,
    backend: Backend | str = DEFAULT_BACKEND,
    limits: Limits | None = None,
    progress: Callable[[str], None] = lambda _: None,
    thresholds: Thresholds = NO_THRESHOLDS,
    secrets_baseline: Collection[str] = (),
) -> ValidationReport:
    if task.verifier is not None:
        return _validate_script(
            task, expected_patch, declared_license, license_allowlist, runs, backend, limits, progress, secrets_baseline
        )
    checks: list[Check] = []
    runner = Runner(task, backend, limits)
    # An environment that cannot be built is its own reason, before any run: "tests don't fail"
    # would point the wrong way.
    environment = _environment_check(task)
    if environment is not None:
        checks.append(environment)
    # The expected patch first, once: a candidate whose tests cannot be collected on this
    # runtime (Python 2 syntax, a vanished dependency) is rejected after one run, not 2 x runs.
    progress(f"patched run 1/{runs}")
    first = runner.run(expected_patch, checks) if environment is None else None
    if first is not None:
        for i in range(runs):
            progress(f"base run {i + 1}/{runs}")
            if runner.run(None, checks) is None:
                break
    if first is not None and not checks:
        for i in range(1, runs):
            progress(f"patched run {i + 1}/{runs}")
            if runner.run(expected_patch, checks) is None:
                break
    executable = not checks
    measured: strength.Strength | None = None
    f2p, p2p, flaky = stable_lists(runner.base, runner.fixed, runner.marked)
    f2p = [t for t in f2p if not runner.unknown_before(t)]
    if executable:
        checks.append(Check("executable", True))
        if task.fail_to_pass:
            wrong = [t for t in task.fail_to_pass if t not in f2p and t not in flaky]
            checks.append(
                Check(
                    "fail_to_pass_matches",
                    not wrong,
                    f"listed FAIL_TO_PASS tests do not fail before and pass after: {', '.join(wrong[:5])}"
                    if wrong
                    else "",
                    wrong,
                )
            )
            f2p = [t for t in task.fail_to_pass if t in f2p]
            p2p = [t for t in (task.pass_to_pass or p2p) if t in p2p]
        checks.append(
            Check(
                "fail_to_pass_nonempty",
                bool(f2p),
                ""
                if f2p
                else "no test fails before the fix and passes after it (tests already pass, "
                "or the patch does not fix them)",
            )
        )
        checks.append(reward_separates(runner, f2p, p2p))
        # Mutants and rewrites of the fix are Python's (libcst): not measured for a Go or JavaScript task.
        if thresholds.min_test_strength is not None and f2p and task.language == PYTHON:
            progress("test strength")
            from tasks import strength  # libcst: 0.25 s of every process's start, for a rare option

            measured = strength.measure(task, f2p + p2p, backend, limits)
            checks += _strength_checks(measured, thresholds.min_test_strength)
        checks.append(
            Check(
                "stable",
                not flaky,
                f"quarantined flaky tests: {', '.join(flaky[:5])}" if flaky else "",
                flaky,
                hard=False,
            )
        )
        checks += _timed_out_base(runner, f2p)
        marked = sorted(runner.marked)
        checks.append(
            Check(
                "xfail_excluded",
                True,
                f"left out of the test lists, marked xfail: {', '.join(marked[:5])}" if marked else "",
                marked,
                hard=False,
            )
        )
    seconds = runner.seconds
    checks += check_context(task, statement, expected_patch, base_commit, tests_are_given=source == "error_log")
    test_files = [p for p in task.tests_dir.rglob("*") if p.is_file()]
    # Judged, not counted: fixtures' placeholder URLs and reviewed (baselined) findings are
    # listed without blocking; only live-looking ones make the task invalid (tasks.secrets).
    secrets = scan_secrets(
        {"statement": statement, "expected_patch": expected_patch},
        [p for p in task.base_dir.rglob("*") if p.is_file() and p.stat().st_size < 1_000_000],
        root=task.base_dir,
        baseline=secrets_baseline,
    )
    checks.append(Check("no_secrets", not live(secrets), summary(secrets), list(secrets)))
    # Judged, as secrets are: a command that would run makes the task unsafe; the same words as
    # a test's data (a path-handling test's "/etc/passwd") or in a comment are listed only.
    dangerous = safety.judge(test_files, task.tests_dir, task.test_command)
    checks.append(
        Check(
            "safe_commands",
            not dangerous.commands,
            "dangerous commands in the tests" if dangerous.commands else "",
            dangerous.commands,
        )
    )
    if dangerous.mentions:
        checks.append(
            Check(
                "dangerous_words_as_data",
                True,
                f"{len(dangerous.mentions)} dangerous-looking words only in strings or comments that run nothing",
                dangerous.mentions,
                hard=False,
            )
        )
    license_check, spdx = detect_license(task.base_dir, declared_license, license_allowlist)
    checks.append(license_check)
    quality = statements.quality(statement, expected_patch)
    min_statement_quality = thresholds.min_statement_quality
    low = quality["score"] < min_statement_quality
    checks.append(
        Check(
            "statement_quality",
            not low and not quality["empty_shells"],
            f"statement quality {quality['score']} < {min_statement_quality}: {_shortfall(quality)}"
            if low
            else (
                f"the statement holds empty reference shells: {quality['empty_shells'][:3]}"
                if quality["empty_shells"]
                else ""
            ),
            [quality],
            # Advice unless a threshold was asked for: a terse statement can still make a fair task.
            hard=min_statement_quality > 0,
        )
    )
    hard_failures = [c for c in checks if not c.ok and c.hard]
    status = "invalid" if hard_failures else ("flaky" if flaky else "valid")
    return ValidationReport(
        status,
        checks,
        f2p,
        p2p,
        flaky,
        spdx,
        needs_review=spdx is None,
        runs=runs,
        test_seconds=round(seconds, 3),
        statement_quality=dict(quality),
        test_strength=measured.to_json() if measured is not None else {},
    )


def _validate_script(
    task: TaskSpec,
    expected_patch: str,
    declared_license: str,
    license_allowlist: list[str],
    runs: int,
    backend: Backend | str,
    limits: Limits | None,
    progress: Callable[[str], None],
    secrets_baseline: Collection[str],
) -> ValidationReport:
    """A task whose verifier is its own script (tasks.script_validation): no test lists to compute."""
    checks, seconds = script_checks(
        task,
        expected_patch,
        runs=runs,
        backend=backend,
        limits=limits,
        progress=progress,
        secrets_baseline=secrets_baseline,
    )
    license_check, spdx = detect_license(task.base_dir, declared_license, license_allowlist)
    checks.append(license_check)
    status = "invalid" if any(not c.ok and c.hard for c in checks) else "valid"
    return ValidationReport(
        status, checks, [], [], [], spdx, needs_review=spdx is None, runs=runs, test_seconds=round(seconds, 3)
    )


def _timed_out_base(runner: Runner, f2p: list[str]) -> list[Check]:
    """Advice when a base run hit its time limit: which FAIL_TO_PASS tests it never reported."""
    if not runner.base_timed_out:
        return []
    unreported = runner.unreported_before(f2p)
    shown = ", ".join(unreported[:5])
    reason = f"{runner.base_timed_out} base run(s) timed out; failing before, never reported: {shown}"
    return [Check("base_timed_out", True, reason, unreported, hard=False)]


def _strength_checks(found: strength.Strength, minimum: float) -> list[Check]:
    """Test strength (the share of mutants of the fix its tests kill) and brittleness (a rewrite
    of the fix that does the same, rejected), tasks.strength."""
    score = found.score
    evidence = [found.to_json()]
    weak = score is not None and score < minimum
    message = ""
    if weak:
        message = (
            f"test strength {score} < {minimum}: the tests let through {len(found.survivors)} of "
            f"{found.mutants} wrong versions of the fix, e.g. {found.survivors[0]}"
        )
    brittle = (
        f"brittle: the tests reject {len(found.brittle)} rewrite(s) of the fix that do the same: {found.brittle[0]}"
        if found.brittle
        else ""
    )
    return [
        Check("test_strength", not weak, message, evidence, hard=minimum > 0),
        Check("not_brittle", not found.brittle, brittle, evidence, hard=False),
    ]


def _shortfall(quality: statements.StatementQuality) -> str:
    """What the score missed, in the terms it is made of (tasks.builders.statements.quality)."""
    missed = [f"{quality['words']} words (full marks from {statements.WORDS_FOR_FULL_LENGTH})"]
    if not quality["names_behaviour"]:
        missed.append("no expected behaviour named")
    if quality["empty_shells"]:
        missed.append(f"empty reference shells {quality['empty_shells'][:3]}")
    if quality["leaks"]:
        missed.append(f"{len(quality['leaks'])} line(s) of the expected patch")
    return ", ".join(missed)


def _environment_check(task: TaskSpec) -> Check | None:
    """A failed Check when the task's environment cannot be had on this host, else None."""
    problem = task.environment_error
    if not problem and task.environment is not None:
        try:
            ensure_environment(task.environment)
        except (EnvBuildError, OSError) as exc:
            problem = str(exc)
    if problem:
        return Check("environment", False, f"the environment cannot be built: {problem}"[:2000])
    return None
