"""The agent's run_tests tool in a Go or JavaScript task: the task's own runner, in the agent's workspace.

A Python task's run_tests is pytest (sandbox.Sandbox.run_tests). A task whose metadata names
`"language": "go"` or `"javascript"` runs through `tasks.lang_tests.run_language_tests`, the one
dispatch that validation and scoring use, so the agent's run and the scorer's agree on runner,
flags and sandbox. What the agent asks for (`paths`) becomes the runner's ids here: a Go package
directory, a `_test.go` file, an import path, `./...`, or a `<package>::<Test>` id; a JavaScript test
file, a directory of them, or a `<file>::<describe> > <test>` id. Nothing of it reaches a command
line: the runners check every id and build their own argv.

The runner files (`go.mod`, `go.sum`, `package.json`, the lock) are put back as the base has them
before the run, in the workspace itself, as scoring does: the agent's run sees what the score will.
The observation says which were put back.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sandbox import Sandbox, SandboxError
from sandbox.go_run import module_path
from sandbox.node_env import NodeEnvError
from sandbox.results import ExecResult, Outcome, TestReport
from sandbox.tools import SKIP_DIRS
from tasks.lang_tests import GO, JAVASCRIPT, PYTHON, check_runner, restore_runner_files, run_language_tests
from tasks.spec import TaskSpec

# What a discovery walk looks at, and finds, at most: a workspace is what the agent's commands left.
MAX_SCANNED = 20_000
MAX_DISCOVERED = 500
MAX_MESSAGE_CHARS = 600
MAX_STDERR_CHARS = 3000
# Vitest's and Jest's default test files (tasks.lang_tests counts the same names as tests).
JS_TEST_FILE = re.compile(r"^.+\.(test|spec)\.(js|mjs|cjs|jsx|ts|mts|cts|tsx)$")
# Shown to the agent: how each language's tests are found and run (the system prompt says it too).
RUNNER_NAMES = {GO: "go test", JAVASCRIPT: "the JavaScript test runner"}
_SHOWN_FIRST = (Outcome.COLLECTION_ERROR, Outcome.ERROR, Outcome.FAILED)


@dataclass(frozen=True)
class LangRun:
    """One run_tests call's result: what the agent reads, and the harness's report for the counts."""

    text: str
    report: TestReport


@dataclass(frozen=True)
class LanguageRunner:
    """run_tests for one Go or JavaScript task (its spec names the base, the language, the timeout)."""

    spec: TaskSpec

    @classmethod
    def of(cls, spec: TaskSpec) -> LanguageRunner | None:
        """The task's runner; None for a Python task (pytest). SandboxError when this host cannot run
        its tests at all (no Go toolchain; a lock that cannot be installed): a host's failure, not a step."""
        if spec.language == PYTHON:
            return None
        try:
            check_runner(spec)
        except NodeEnvError as exc:
            raise SandboxError(f"{spec.task_id}: its dependencies cannot be installed: {exc}") from None
        return cls(spec)

    @property
    def language(self) -> str:
        return self.spec.language

    def run(self, box: Sandbox, paths: Sequence[str]) -> LangRun:
        """Run `paths` (all of the workspace's tests when empty) in `box`. SandboxError when the runner
        refuses what it is asked or what the workspace holds (the message is the agent's to read)."""
        restored = restore_runner_files(box.workspace, self.spec.base_dir, self.language)
        ids = test_ids(self.language, box.workspace, paths)
        if not ids:
            return LangRun(_no_tests(self.language), TestReport(exec=ExecResult(exit_code=None, stdout="", stderr="")))
        try:
            report = run_language_tests(self.spec, box.workspace, ids, box.backend, box.limits)
        except NodeEnvError as exc:
            raise SandboxError(f"the dependencies cannot be installed: {exc}") from None
        return LangRun(describe(self.language, report, restored), report)


def test_ids(language: str, workspace: Path, paths: Sequence[str]) -> list[str]:
    """The runner's ids for what the agent asked (`paths`), or for every test in the workspace."""
    if language == GO:
        module, _ = module_path(workspace)
        if not paths:
            return _go_packages(workspace, module, workspace)
        return list(dict.fromkeys(i for p in paths for i in _go_ids(workspace, module, p)))
    if not paths:
        return _js_files(workspace, workspace)
    return list(dict.fromkeys(i for p in paths for i in _js_ids(workspace, p)))


def _go_ids(workspace: Path, module: str, path: str) -> list[str]:
    target, sep, test = path.partition("::")
    if target in ("...", "./..."):
        return _go_packages(workspace, module, workspace)
    if target == module or target.startswith(module + "/"):
        return [path]  # an import path already; the runner checks it is this module's
    rel = target.removeprefix("./").rstrip("/")
    if rel.endswith("/..."):
        return _go_packages(workspace, module, _inside(workspace, rel.removesuffix("/...")))
    if rel.endswith(".go"):
        rel = str(PurePosixPath(rel).parent)
    package = module if rel in ("", ".") else f"{module}/{rel}"
    return [f"{package}{sep}{test}"]


def _js_ids(workspace: Path, path: str) -> list[str]:
    target, _, _ = path.partition("::")
    rel = target.removeprefix("./").rstrip("/")
    if "::" not in path:
        directory = _inside(workspace, rel or ".")
        if directory.is_dir():
            return _js_files(workspace, directory)
    return [path if rel == target else rel + path[len(target) :]]


def _inside(workspace: Path, rel: str) -> Path:
    """A directory the agent named, refused when it is a link or leads out of the workspace."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts:
        raise SandboxError(f"{rel[:200]!r}: not a path inside the repository")
    found = workspace.joinpath(*pure.parts)
    for parent in [found, *found.parents]:
        if parent == workspace:
            break
        if parent.is_symlink():
            raise SandboxError(f"{rel[:200]!r}: goes through a symbolic link")
    return found


def _walk(start: Path) -> list[tuple[Path, list[str]]]:
    """(directory, its file names) under `start`, links never followed, hidden and dependency folders
    skipped, bounded."""
    found, scanned = [], 0
    for directory, subdirs, files in os.walk(start, followlinks=False):
        scanned += len(subdirs) + len(files)
        if scanned > MAX_SCANNED:
            raise SandboxError(f"over {MAX_SCANNED} files and folders to look through: name the tests to run")
        subdirs[:] = sorted(
            d for d in subdirs if d not in SKIP_DIRS and d not in ("vendor", "testdata") and d[:1] not in "._"
        )
        found.append((Path(directory), sorted(f for f in files if not os.path.islink(os.path.join(directory, f)))))
    return found


def _go_packages(workspace: Path, module: str, start: Path) -> list[str]:
    packages = []
    for directory, files in _walk(start):
        if any(f.endswith("_test.go") for f in files):
            rel = directory.relative_to(workspace).as_posix()
            packages.append(module if rel == "." else f"{module}/{rel}")
    return _bounded(packages)


def _js_files(workspace: Path, start: Path) -> list[str]:
    found = []
    for directory, files in _walk(start):
        rel = directory.relative_to(workspace)
        found += [(rel / f).as_posix() for f in files if JS_TEST_FILE.match(f)]
    return _bounded(found)


def _bounded(ids: list[str]) -> list[str]:
    if len(ids) > MAX_DISCOVERED:
        raise SandboxError(f"{len(ids)} test packages or files: name at most {MAX_DISCOVERED} to run")
    return ids


def _no_tests(language: str) -> str:
    where = "no *_test.go file" if language == GO else "no *.test.* or *.spec.* file"
    return f"no tests to run: {where} in the repository (or under the paths given)"


def describe(language: str, report: TestReport, restored: Sequence[str]) -> str:
    """The run as the agent reads it: a summary line, then failures first, each with its message."""
    outcomes = [t for _, t in sorted(report.tests.items())]
    counts = {o: sum(1 for t in outcomes if t.outcome == o) for o in Outcome}
    summary = ", ".join(f"{n} {o.replace('_', ' ')}" for o, n in counts.items() if n) or "no tests reported"
    lines = [f"{RUNNER_NAMES[language]}: {summary} (exit code {report.exec.exit_code})"]
    if restored:
        lines.append(f"put back as the base has them (tests always run with these): {', '.join(restored)}")
    ordered = sorted(outcomes, key=lambda t: t.outcome not in _SHOWN_FIRST)
    for test in ordered:
        lines.append(f"{test.outcome.upper()} {test.nodeid}")
        if test.outcome in _SHOWN_FIRST and test.message.strip():
            message = test.message.strip()
            cut = message[:MAX_MESSAGE_CHARS] + (" [...]" if len(message) > MAX_MESSAGE_CHARS else "")
            lines += ["    " + line for line in cut.splitlines()]
    stderr = report.exec.stderr.strip()
    if stderr:
        lines += ["[stderr]", stderr[-MAX_STDERR_CHARS:]]
    if not report.valid:
        why = "; ".join([*report.inconsistencies, *([report.unsafe] if report.unsafe else [])])
        lines.append(f"[the harness does not believe this run: {why[:1000]}]")
    return "\n".join(lines)
