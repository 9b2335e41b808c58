"""Task validation: executable, reproducible, context complete, safe, licensed.

Plain Python over a TaskSpec (no Django), so a worker or a script can run it; the
result is a report with a status and the evidence for every reason.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any

from license_expression import get_spdx_licensing

from patches import PatchError, parse
from sandbox import Limits, ToolError
from sandbox.backends.base import Backend
from sandbox.environments import EnvBuildError, ensure_environment
from sandbox.names import DEFAULT_BACKEND
from sandbox.results import Outcome, TestReport
from tasks import safety, strength
from tasks.builders import statements
from tasks.secrets import live, scan_secrets, summary
from tasks.spec import TaskSpec, run_task_tests

logger = logging.getLogger(__name__)

# Repository paths a statement points the agent at: anything with a directory part, or
# a Python module. A bare "local.cfg" is usually the user's file, not the repo's.
PATH_TOKEN = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.\w+|[\w-]+\.py)\b")
# A test file that cannot be imported must not hide the outcomes of every other file: pytest
# would stop the whole run, and each test would look "missing" on the base.
VALIDATION_ARGS = ("--continue-on-collection-errors",)
# pytest's own default for `python_files`: which hidden files are test modules to run.
DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")
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
class Check:
    name: str
    ok: bool
    reason: str = ""
    evidence: list[Any] = field(default_factory=list)
    hard: bool = True  # a failed hard check makes the task invalid


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
    checks: list[Check] = []
    runner = _Runner(task, backend, limits)
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
    f2p, p2p, flaky = _stable_lists(runner.base, runner.fixed, runner.marked)
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
        checks.append(_reward_separates(runner, f2p, p2p))
        if thresholds.min_test_strength is not None and f2p:
            progress("test strength")
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


def _stable_lists(
    base_runs: list[dict[str, str]], fixed_runs: list[dict[str, str]], marked: Collection[str] = ()
) -> tuple[list[str], list[str], list[str]]:
    """FAIL_TO_PASS, PASS_TO_PASS and flaky tests from repeated runs; xfail-marked tests are in none."""
    if not base_runs or not fixed_runs:
        return [], [], []
    nodes = sorted(set().union(*base_runs, *fixed_runs) - set(marked))
    f2p, p2p, flaky = [], [], []
    for node in nodes:
        before = {run.get(node, "missing") for run in base_runs}
        after = {run.get(node, "missing") for run in fixed_runs}
        if len(before) > 1 or len(after) > 1:
            flaky.append(node)
        elif after == {"passed"} and before != {"passed"}:
            f2p.append(node)
        elif after == {"passed"} and before == {"passed"}:
            p2p.append(node)
    return f2p, p2p, flaky


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


def hidden_paths(task: TaskSpec) -> list[str]:
    """Every hidden test file, as its path in the repository."""
    base = PurePosixPath(task.tests_dest)
    found = (p for p in task.tests_dir.rglob("*") if p.is_file() and not p.is_symlink())
    return sorted(str(base / p.relative_to(task.tests_dir).as_posix()) for p in found)


def selected_files(task: TaskSpec) -> tuple[str, ...]:
    """The files validation runs: the hidden test modules (by the repository's `python_files`) and
    the files of the tests the task already lists.

    Only they are collected, so a test file elsewhere that cannot be imported (a git submodule
    the repository's bundle lacks) leaves the task's own tests alone. None when the hidden
    files are the tests' data or helpers only and no test is listed: the tests that read them
    are unknown, so the whole suite runs. A name pytest would read as an option is never passed.
    """
    settings = task.environment.pytest if task.environment is not None else None
    patterns = dict(settings.ini).get("python_files", DEFAULT_PYTHON_FILES) if settings else DEFAULT_PYTHON_FILES
    hidden = hidden_paths(task)
    modules = {path for path in hidden if _is_module(PurePosixPath(path).name, patterns)}
    # A listed test in a file neither hidden nor in the base would stop the whole run ("not found").
    listed = {node.split("::", 1)[0] for node in (*task.fail_to_pass, *task.pass_to_pass)}
    listed = {path for path in listed if path in hidden or (task.base_dir / path).is_file()}
    return tuple(sorted(path for path in modules | listed if path and not path.startswith("-") and "::" not in path))


def _is_module(name: str, patterns: Collection[str]) -> bool:
    # pytest imports a conftest.py or __init__.py for itself; named as a test file it would be imported twice.
    return name not in ("conftest.py", "__init__.py") and any(fnmatch(name, pattern) for pattern in patterns)


class _Runner:
    """The validation runs of one task: outcomes per run, and the first reason to stop, as a Check."""

    def __init__(self, task: TaskSpec, backend: Backend | str, limits: Limits | None) -> None:
        self.task, self.backend, self.limits = task, backend, limits
        self.selected = selected_files(task)
        self.hidden = hidden_paths(task)
        self.base: list[dict[str, str]] = []
        self.fixed: list[dict[str, str]] = []
        self.marked: set[str] = set()
        self.untrusted: list[str] = []
        self.seconds = 0.0

    def run(self, patch: str | None, checks: list[Check]) -> TestReport | None:
        """One run; None (with the reason appended to `checks`) when the task cannot go on."""
        side = "with the expected patch" if patch is not None else "on the base"
        try:
            report = run_task_tests(self.task, patch, self.backend, self.limits, (*VALIDATION_ARGS, *self.selected))
        except ToolError as exc:
            checks.append(Check("executable", False, f"the expected patch does not apply: {exc}"))
            return None
        self.seconds += report.exec.duration_ms / 1000
        evidence = [report.exec.stdout[-1000:], report.exec.stderr[-1000:]]
        broken = [node for node in report.collection_errors if self._counts(node)]
        if broken and patch is not None:
            last = {node: (report.tests[node].message.strip().splitlines() or [""])[-1] for node in broken}
            shown = "; ".join(f"{node}: {line}" for node, line in list(last.items())[:3])
            reason = f"tests cannot be collected {side}: {shown}"
            checks.append(Check("collectable", False, reason, [*broken, *evidence]))
            return None
        if not report.tests:
            checks.append(
                Check(
                    "executable",
                    False,
                    f"the test command ran no tests {side}: "
                    + "; ".join(report.inconsistencies or [report.exec.stderr[-300:]]),
                    evidence,
                )
            )
            return None
        if not report.valid:
            # Scoring gives a run it cannot believe nothing: the expected patch would score no better than none.
            self.untrusted += [f"{side}: {problem}" for problem in report.inconsistencies or [report.unsafe]]
        self.marked |= {node for node, t in report.tests.items() if t.xfail}
        (self.fixed if patch is not None else self.base).append({node: t.outcome for node, t in report.tests.items()})
        return report

    def _counts(self, broken: str) -> bool:
        """Whether a file (or folder) that could not be collected is the task's: anything collected
        when only the hidden test modules ran, else a hidden file or a folder holding one."""
        folder = broken.rstrip("/") + "/"
        return bool(self.selected) or any(path == broken or path.startswith(folder) for path in self.hidden)


def _reward_separates(runner: _Runner, f2p: list[str], p2p: list[str]) -> Check:
    """The expected patch must score above the empty one, as `reward_sanity` demands, by scoring's own rule:
    a run it cannot believe earns nothing, a broken PASS_TO_PASS test -1, every FAIL_TO_PASS test passing 1."""
    if runner.untrusted:
        return Check(
            "reward_separates",
            False,
            "the test report and pytest's summary disagree, so scoring would not believe the expected patch: "
            + "; ".join(runner.untrusted[:3]),
            runner.untrusted,
        )
    missed = sorted({t for run in runner.fixed for t in (*f2p, *p2p) if run.get(t) != Outcome.PASSED})
    if missed:
        return Check("reward_separates", False, f"the expected patch does not pass: {', '.join(missed[:5])}", missed)
    return Check("reward_separates", True)
