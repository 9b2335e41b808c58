"""A JavaScript or TypeScript repository's Vitest or Jest tests, run in the sandbox offline and hermetically.

The harness writes the Vitest configuration (a plain ES module, no imports) into a directory
mounted read-only outside the workspace and names it with `--config`: the repository's own
vitest.config.* and vite.config.* are never loaded, so they choose neither the reporters, nor the
output files, nor which files and tests run. `--configLoader native` imports it as it is (Vite's
default loader would bundle it into a file beside it, in a read-only directory). The JUnit and JSON
reports go to FIFOs (sandbox.report_fifo) and are read with sandbox.outcomes_js.

Jest is run the same way: a JSON configuration of the harness's, named with `--config`, so the
repository's jest.config.* and package.json "jest" key are never run (their `fakeTimers`, which
the tests' clock depends on, is read as data: sandbox.js_options); jest-junit is always the
harness's own lock-pinned copy (JEST_JUNIT_LOCK), set up entirely through its environment
variables, which come before anything a package.json "jest-junit" key says.

Dependencies come from the lock file, installed on the host (sandbox.node_env) and mounted
read-only as the workspace's node_modules. A node_modules directory anywhere else in the workspace
is refused: Node would resolve the tests' imports (`vitest` itself) from it first.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from sandbox.backends.base import WORKSPACE_MOUNT, Backend, SandboxError
from sandbox.js_options import jest_options, vitest_options
from sandbox.junit import ReportError
from sandbox.lang_run import RunDirs, RunPlan, checked_ids, lang_report, run_plan
from sandbox.limits import Limits
from sandbox.node_env import SYSTEM_NODE, NodeToolchain, ensure_node_modules
from sandbox.outcomes_js import JEST_ENV, SEPARATOR, JsRunner, parse_js
from sandbox.results import TestReport

JUNIT, SUMMARY, CONFIG = "junit.xml", "summary.json", "vitest.config.mjs"
JEST_CONFIG = "jest.config.json"
MODULES = f"{WORKSPACE_MOUNT}/node_modules"
VITEST_ENTRY = f"{MODULES}/vitest/vitest.mjs"
JEST_ENTRY = f"{MODULES}/jest/bin/jest.js"
# The one jest-junit every Jest run reports with (the version the reader's fixtures come from), from
# the harness's own lock, installed once per host like a repository's: a repository's jest-junit,
# if it has one, is never loaded, so neither its version nor its settings shape the XML.
JEST_JUNIT_LOCK = Path(__file__).resolve().parent / "js_harness" / "jest-junit"
# Every option jest-junit reads from its environment, pinned: the environment comes before its
# options in a package.json "jest-junit" key, which would otherwise choose the file, the ids' shape
# and modules to require. "." is the empty file prefix (path.join drops it).
JEST_JUNIT_ENV = {
    **JEST_ENV,
    "JEST_SUITE_NAME": "jest tests",
    "JEST_JUNIT_UNIQUE_OUTPUT_NAME": "false",
    "JEST_JUNIT_SUITE_NAME": "{title}",
    "JEST_JUNIT_FILE_PATH_PREFIX": ".",
    "JEST_JUNIT_INCLUDE_CONSOLE_OUTPUT": "false",
    "JEST_JUNIT_INCLUDE_SHORT_CONSOLE_OUTPUT": "false",
    "JEST_JUNIT_NO_STACK_TRACE": "false",
    "JEST_USE_PATH_FOR_SUITE_NAME": "false",
    "JEST_JUNIT_TEST_CASE_PROPERTIES_JSON_FILE": "junitTestCaseProperties.js",
    "JEST_JUNIT_TEST_SUITE_PROPERTIES_JSON_FILE": "junitProperties.js",
}
_TYPESCRIPT = re.compile(r"\.[cm]?tsx?$")
MAX_SCANNED = 20_000
# Node, Vite and Rolldown's native code take over 2 GiB of address space (RLIMIT_AS) between them:
# at 2 GiB Vite's lexer cannot instantiate its Wasm. Real memory is still the cgroup's to bound.
DEFAULT_LIMITS = Limits(memory_mb=4096)
MIN_MEMORY_MB = 3072
# What the runner's own process reserves grows with the host's cores: Rolldown's thread pools (tokio,
# rayon) are sized by them, and so are the runners' worker counts. Unpinned, a real suite
# (tough-cookie's 24 files) aborts with std::bad_alloc at 4096 MiB once they are sized for 16 cores;
# pinned, it needs the same on any host. glibc's malloc arenas are left alone: capped
# (MALLOC_ARENA_MAX=2), Rolldown's oxc allocator runs out of memory on jsonrepair's whole suite at any
# limit (8192 MiB too), while uncapped it passes at 4096 with the pools pinned (docs/languages.md, "Jest").
THREAD_ENV = {
    "UV_THREADPOOL_SIZE": "4",
    "RAYON_NUM_THREADS": "2",
    "TOKIO_WORKER_THREADS": "2",
    "ROLLDOWN_WORKER_THREADS": "2",
}
WORKERS = 2
# Characters a glob would read as syntax (tinyglobby / picomatch): each is matched literally once escaped.
_GLOB_SPECIAL = re.compile(r"([*?\[\]{}()!+@|,])")
_REGEX_SPECIAL = re.compile(r"([\\^$.*+?()\[\]{}|/-])")
CONFIG_TEMPLATE = """// Written by the Crucible harness for one run; nothing in the workspace is read for configuration.
export default {{
  root: {root},
  cacheDir: {cache},
  test: {{
    include: {include},
    exclude: [],
    reporters: ["junit", "json"],
    outputFile: {{ junit: {junit}, json: {summary} }},
    testNamePattern: {pattern},
    watch: false,
    maxWorkers: {workers},
    // As in NODE_OPTIONS (run_js_tests): the workers' Wasm within the sandbox's address-space limit.
    execArgv: ["--disable-wasm-trap-handler"],
    allowOnly: false,
    passWithNoTests: false,
    setupFiles: [],
    globalSetup: [],
    coverage: {{ enabled: false }},
    typecheck: {{ enabled: false }},
    // The project's own, read as data from the task's base (sandbox.js_options).
    {options}
  }},
}};
"""


def js_string(text: str) -> str:
    """A JavaScript string literal for any text: JSON's escaping, with U+2028 and U+2029 escaped too."""
    return json.dumps(text, ensure_ascii=True)


def test_file(workspace: Path, file: str) -> str:
    """A test file's path as the ids spell it (relative to the root), when it is a plain file there."""
    path = PurePosixPath(file)
    if path.is_absolute() or ".." in path.parts or "\\" in file or file != str(path) or file.startswith("-"):
        raise SandboxError(f"test file {file[:200]!r}: not a plain relative path")
    host = workspace.joinpath(*path.parts)
    if host.is_symlink() or not host.is_file():
        raise SandboxError(f"test file {file[:200]!r}: not a file in the workspace")
    return file


def selection(workspace: Path, test_ids: Sequence[str]) -> tuple[list[str], str | None]:
    """(the files to run, the name pattern or None for every test in them) for `<file>::<a > b>` ids.

    An id naming a file alone runs all of that file, and then every test of the selected files runs.
    Vitest matches the pattern against a test's names joined by spaces, the file's first: the
    pattern is anchored at the end and on a space, so it selects these names in any file run.
    """
    files: dict[str, None] = {}
    names: set[str] = set()
    whole = False
    for test_id in checked_ids(test_ids):
        file, _, path = test_id.partition("::")
        files[test_file(workspace, file)] = None
        if not path:
            whole = True
        else:
            names.add(_name_regex(path))
    if not files:
        raise SandboxError("no test ids to run")
    if whole or not names:
        return list(files), None
    return list(files), f"(?:^| )(?:{'|'.join(sorted(names))})$"


def _name_regex(path: str) -> str:
    """The runner's full name of `describe > ... > test`, as a regex: its names joined by spaces. A
    title may itself hold " > " (luxon's "precision is > 'minute'"), which the id cannot tell from
    nesting, so each separator matches either a space or itself."""
    return "(?: | > )".join(_REGEX_SPECIAL.sub(r"\\\1", part) for part in path.split(SEPARATOR))


def vitest_config(
    files: Sequence[str],
    pattern: str | None,
    root: str,
    junit: str,
    summary: str,
    cache: str = "/tmp/vite",  # noqa: S108 - the sandbox's private /tmp
    options: dict[str, Any] | None = None,
) -> str:
    """The harness's Vitest configuration: these files and names, its reporters to these paths, and
    of the repository's only the `options` its tests rely on (sandbox.js_options.vitest_options;
    a bare run on the host takes it too, with host paths)."""
    include = "[" + ", ".join(js_string(_GLOB_SPECIAL.sub(r"\\\1", f)) for f in files) + "]"
    return CONFIG_TEMPLATE.format(
        options=vitest_options_source(options or {}),
        root=js_string(root),
        cache=js_string(cache),
        include=include,
        junit=js_string(junit),
        summary=js_string(summary),
        pattern=f"new RegExp({js_string(pattern)})" if pattern is not None else "undefined",
        workers=WORKERS,
    )


def vitest_options_source(options: dict[str, Any]) -> str:
    """sandbox.js_options.vitest_options as properties of a Vitest `test` object, Vitest's own
    defaults where the project sets none: the harness's config and the Harbor export's both hold them."""
    return (
        f"globals: {'true' if options.get('globals') else 'false'},"
        f" environment: {js_string(str(options.get('environment', 'node')))},"
        f" testTimeout: {int(options.get('testTimeout', 5000))},"
    )


def jest_config(
    files: Sequence[str], pattern: str | None, modules: Path, junit: str, options: dict[str, Any] | None = None
) -> str:
    """The harness's Jest configuration (JSON): which files and tests, and how they are transformed,
    with the project's own `options` its tests rely on (sandbox.js_options.jest_options: the clock,
    the environment, the time limit, read as data).

    The transform is the harness's too: babel-jest with no babel configuration file of the
    repository's (babel.config.*, .babelrc, a package.json "babel" key run code and can rewrite the
    tests), only @babel/preset-env when the lock has it; TypeScript through ts-jest when the lock has it.
    """
    babel: dict[str, object] = {"configFile": False, "babelrc": False, "presets": []}
    if (modules / "@babel" / "preset-env").is_dir():
        babel["presets"] = [
            [f"{MODULES}/@babel/preset-env", {"targets": {"node": "current"}, "ignoreBrowserslistConfig": True}]
        ]
    transform: dict[str, object] = {}
    if (modules / "babel-jest").is_dir():
        transform[r"\.[cm]?jsx?$"] = [f"{MODULES}/babel-jest", babel]
    mapper: dict[str, str] = {}
    if any(_TYPESCRIPT.search(f) for f in files):
        if not (modules / "ts-jest").is_dir():
            raise SandboxError("a TypeScript test file runs under Jest only through ts-jest, which the lock file lacks")
        transform[r"\.[cm]?tsx?$"] = [f"{MODULES}/ts-jest", {}]
        # TypeScript's own rule for ES module sources: `./x.js` names x.ts when no x.js exists.
        # Jest tries the extensions in order, js first, so an x.js still wins as it would.
        mapper[r"^(\.{1,2}/.*)\.js$"] = "$1"
    config = {
        "rootDir": WORKSPACE_MOUNT,
        "roots": [WORKSPACE_MOUNT],
        "testRegex": ["^" + re.escape(f"{WORKSPACE_MOUNT}/{f}") + "$" for f in files],
        "testNamePattern": pattern,
        "reporters": ["default", junit],
        "transform": transform,
        "setupFiles": [],
        "setupFilesAfterEnv": [],
        "globalSetup": None,
        "globalTeardown": None,
        "snapshotSerializers": [],
        "moduleNameMapper": mapper,
        "testEnvironment": "node",
        "cacheDirectory": "/tmp/jest",  # noqa: S108 - the sandbox's own /tmp, fresh each run
        "watchman": False,
        "collectCoverage": False,
        "ci": True,
        "maxWorkers": WORKERS,
    }
    config.update(options or {})
    if pattern is None:
        del config["testNamePattern"]
    return json.dumps(config, indent=2) + "\n"


def refuse_planted_modules(workspace: Path) -> None:
    """No node_modules of the workspace's own, at its top or below: imports would resolve there first."""
    scanned = 0
    for directory, subdirs, files in os.walk(workspace):
        scanned += len(subdirs) + len(files)
        if scanned > MAX_SCANNED:
            raise SandboxError(f"the workspace holds over {MAX_SCANNED} entries: too many to check for node_modules")
        for name in subdirs + files:
            if name == "node_modules":
                where = os.path.relpath(os.path.join(directory, name), workspace)
                raise SandboxError(f"the workspace has its own {where}: dependencies come only from the lock file")
        subdirs[:] = [d for d in subdirs if d != ".git"]


def _node_env(node: NodeToolchain) -> dict[str, str]:
    """What every runner's environment says of Node: a release's bin/ first on PATH (a test that runs
    `node` by name gets the same Node); nothing for the system's."""
    return {} if node.system else {"PATH": node.path_env("/usr/local/bin:/usr/bin:/bin")}


def vitest_plan(
    workspace: Path,
    test_ids: Sequence[str],
    modules: Path,
    node: NodeToolchain = SYSTEM_NODE,
    project: Path | None = None,
) -> tuple[RunPlan, RunDirs]:
    """`project` is where the Vitest options the tests rely on are read (the task's base; default the workspace)."""
    refuse_planted_modules(workspace)
    if not (modules / "vitest" / "vitest.mjs").is_file():
        raise SandboxError("vitest is not among the lock file's packages")
    files, pattern = selection(workspace, test_ids)
    dirs = RunDirs.fresh()
    config = f"{dirs.harness}/{CONFIG}"
    argv = [node.node, VITEST_ENTRY, "run", "--config", config, "--configLoader", "native", "--root", WORKSPACE_MOUNT]
    # Wasm memories reserve ~10 GiB of address space each unless bounds are checked in code: the
    # sandbox limits address space (RLIMIT_AS), so the trap handler is off in every node process.
    env = {
        "NODE_OPTIONS": "--disable-wasm-trap-handler",
        "CI": "true",
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        "TZ": "UTC",
        **THREAD_ENV,
        **_node_env(node),
    }
    binds = [(modules, f"{WORKSPACE_MOUNT}/node_modules"), *node.binds()]
    options = vitest_options(project or workspace)
    junit, summary = dirs.report(JUNIT), dirs.report(SUMMARY)
    harness = {CONFIG: vitest_config(files, pattern, WORKSPACE_MOUNT, junit, summary, options=options)}
    # Vitest opens its JUnit file read-write; the summary it only writes, so no test can read it away.
    return RunPlan(argv, env, (JUNIT, SUMMARY), (JUNIT,), harness, binds), dirs


def jest_plan(
    workspace: Path,
    test_ids: Sequence[str],
    modules: Path,
    node: NodeToolchain = SYSTEM_NODE,
    project: Path | None = None,
) -> tuple[RunPlan, RunDirs]:
    """`project` is where the Jest options the tests rely on are read (the task's base; default the workspace)."""
    refuse_planted_modules(workspace)
    if not (modules / "jest" / "bin" / "jest.js").is_file():
        raise SandboxError("jest is not among the lock file's packages")
    reporter_modules = ensure_node_modules(JEST_JUNIT_LOCK, node)
    files, pattern = selection(workspace, test_ids)
    dirs = RunDirs.fresh()
    reporter = f"/run/{secrets.token_hex(16)}/node_modules"
    config = f"{dirs.harness}/{JEST_CONFIG}"
    argv = [node.node, JEST_ENTRY, "--config", config, "--json", "--outputFile", dirs.report(SUMMARY), "--forceExit"]
    env = {
        "NODE_OPTIONS": "--disable-wasm-trap-handler",
        "CI": "true",
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        "TZ": "UTC",
        **THREAD_ENV,
        **_node_env(node),
        **JEST_JUNIT_ENV,
        "JEST_JUNIT_OUTPUT_FILE": dirs.report(JUNIT),
        # Not the workspace: jest-junit requires these files, when they exist, into the reporter.
        "JEST_JUNIT_TEST_CASE_PROPERTIES_DIR": dirs.harness,
        "JEST_JUNIT_TEST_SUITE_PROPERTIES_DIR": dirs.harness,
    }
    binds = [(modules, MODULES), (reporter_modules, reporter), *node.binds()]
    options = jest_options(project or workspace)
    harness = {JEST_CONFIG: jest_config(files, pattern, modules, f"{reporter}/jest-junit", options)}
    # Jest and jest-junit only write their reports: both FIFOs are write-only to the sandbox.
    return RunPlan(argv, env, (JUNIT, SUMMARY), (), harness, binds), dirs


def run_js_tests(
    workspace: Path,
    test_ids: Sequence[str],
    timeout: float,
    *,
    backend: Backend,
    root: Path | None = None,
    limits: Limits | None = None,
    project: Path | None = None,
    runner: JsRunner = JsRunner.VITEST,
    node: NodeToolchain | None = None,
) -> TestReport:
    """Run the given `<file>::<describe> > <test>` ids of the Vitest or Jest project at `workspace` in the sandbox.

    Its dependencies are those of the lock file at `project` (default: the workspace; a caller that
    has the task's base should name it, so that a patch never chooses what is installed). `node` is
    the Node to install and run with (sandbox.node_versions; default: the system's).
    """
    node = node or SYSTEM_NODE
    limits = (limits or DEFAULT_LIMITS).with_timeout(timeout)
    if limits.memory_mb < MIN_MEMORY_MB:
        raise SandboxError(
            f"a {runner} run needs memory_mb of at least {MIN_MEMORY_MB} (address space), not {limits.memory_mb}"
        )
    modules = ensure_node_modules(project or workspace, node)
    if runner == JsRunner.JEST:
        plan, dirs = jest_plan(workspace, test_ids, modules, node, project)
    else:
        plan, dirs = vitest_plan(workspace, test_ids, modules, node, project)
    result, data = run_plan(plan, dirs, workspace, backend, limits, root)
    xml, summary = data[JUNIT], data[SUMMARY]
    try:
        if not xml.data or not summary.data:
            raise ReportError(f"no {'JUnit report' if not xml.data else 'JSON summary'} was written")
        tests, problems = parse_js(xml.data, summary.data, result.exit_code, runner)
    except ReportError as exc:
        tests, problems = {}, [str(exc)]
    for name, got in ((JUNIT, xml), (SUMMARY, summary)):
        if got.truncated:
            problems.insert(0, f"the runner's {name} is over the size limit: the rest was dropped")
    return lang_report(result, tests, problems)
