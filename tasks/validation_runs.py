"""The test runs of one task's validation: each run's outcomes, the first reason to stop, and the
FAIL_TO_PASS, PASS_TO_PASS and flaky lists they make (tasks.validation puts them in its report)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import PurePosixPath
from typing import Any

from sandbox import Limits, ToolError
from sandbox.backends.base import Backend
from sandbox.results import Outcome, TestReport
from tasks.spec import TaskSpec, run_task_tests

# A test file that cannot be imported must not hide the outcomes of every other file: pytest
# would stop the whole run, and each test would look "missing" on the base.
VALIDATION_ARGS = ("--continue-on-collection-errors",)
# pytest's own default for `python_files`: which hidden files are test modules to run.
DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")


@dataclass
class Check:
    name: str
    ok: bool
    reason: str = ""
    evidence: list[Any] = field(default_factory=list)
    hard: bool = True  # a failed hard check makes the task invalid


def stable_lists(
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


# A terminal colour or cursor code: ts-jest prints TypeScript's diagnostics with them.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NAMES_ERROR = re.compile(r"\berror\b|Error\b")


def headline(message: str) -> str:
    """The line of a collection error that says what failed: the last that names an error (pytest's
    `E   ImportError: ...`, TypeScript's `x.ts:52:19 - error TS2554: ...`), else the last line."""
    lines = [line.strip() for line in _ANSI.sub("", message).splitlines() if line.strip()]
    named = [line for line in lines if _NAMES_ERROR.search(line)]
    return (named or lines or [""])[-1][:300]


class Runner:
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
        # Base runs that hit the run's own time limit: what they reported before it stands.
        self.base_timed_out = 0

    def run(self, patch: str | None, checks: list[Check]) -> TestReport | None:
        """One run; None (with the reason appended to `checks`) when the task cannot go on."""
        side = "with the expected patch" if patch is not None else "on the base"
        args = (*VALIDATION_ARGS, *self.selected)
        try:
            # Sealed as scoring's runs are: a base run cut short still has what it sent as each test ended.
            report = run_task_tests(self.task, patch, self.backend, self.limits, args, seal=secrets.token_hex(12))
        except ToolError as exc:
            checks.append(Check("executable", False, f"the expected patch does not apply: {exc}"))
            return None
        self.seconds += report.exec.duration_ms / 1000
        evidence = [report.exec.stdout[-1000:], report.exec.stderr[-1000:]]
        broken = [node for node in report.collection_errors if self._counts(node)]
        if broken and patch is not None:
            last = {node: headline(report.tests[node].message) for node in broken}
            shown = "; ".join(f"{node}: {line}" for node, line in list(last.items())[:3])
            reason = f"tests cannot be collected {side}: {shown}"
            checks.append(Check("collectable", False, reason, [*broken, *evidence]))
            return None
        # A base that hangs (the bug the fix repairs) ends its run at the time limit: that is the
        # base failing, not a run to disbelieve. A patched run that does so is still one.
        cut_short = patch is None and report.exec.timed_out
        if not report.tests and not cut_short:
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
        self.base_timed_out += cut_short
        problems = [*report.tampered, *([report.unsafe] if report.unsafe else [])]
        if not cut_short:
            problems = [*report.inconsistencies, *problems]
        if problems:
            # Scoring gives a run it cannot believe nothing: the expected patch would score no better than none.
            self.untrusted += [f"{side}: {problem}" for problem in problems]
        self.marked |= {node for node, t in report.tests.items() if t.xfail}
        (self.fixed if patch is not None else self.base).append({node: t.outcome for node, t in report.tests.items()})
        return report

    def unreported_before(self, nodes: Collection[str]) -> list[str]:
        """Of `nodes`, the hidden tests that count as failing before only because a base run that
        timed out never reported them: it never passed them (what a hang before the fix looks like)."""
        if not self.base_timed_out:
            return []
        return [n for n in nodes if self._hidden(n) and all(n not in run for run in self.base)]

    def unknown_before(self, node: str) -> bool:
        """A test no base run reported, after one timed out, outside the hidden files: not known to fail before."""
        return bool(self.base_timed_out) and not self._hidden(node) and all(node not in run for run in self.base)

    def _hidden(self, node: str) -> bool:
        return node.split("::", 1)[0] in self.hidden

    def _counts(self, broken: str) -> bool:
        """Whether a file (or folder) that could not be collected is the task's: anything collected
        when only the hidden test modules ran, else a hidden file or a folder holding one."""
        folder = broken.rstrip("/") + "/"
        return bool(self.selected) or any(path == broken or path.startswith(folder) for path in self.hidden)


def reward_separates(runner: Runner, f2p: list[str], p2p: list[str]) -> Check:
    """The expected patch must score above the empty one, as `reward_sanity` demands, by scoring's own rule:
    a run it cannot believe earns nothing, a broken PASS_TO_PASS test -1, every FAIL_TO_PASS test passing 1."""
    if runner.untrusted:
        return Check(
            "reward_separates",
            False,
            "the test report and the runner's summary disagree, so scoring would not believe the expected patch: "
            + "; ".join(runner.untrusted[:3]),
            runner.untrusted,
        )
    missed = sorted({t for run in runner.fixed for t in (*f2p, *p2p) if run.get(t) != Outcome.PASSED})
    if missed:
        return Check("reward_separates", False, f"the expected patch does not pass: {', '.join(missed[:5])}", missed)
    return Check("reward_separates", True)
