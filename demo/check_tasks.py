#!/usr/bin/env python3
"""Check that every demo task really is a task.

For each task directory (default: every ``task_*`` under ``demo/tasks`` and every task of the Go
and JavaScript suites, ``demo/go_tasks`` and ``demo/js_tasks``):

1. the repository's own tests pass on the buggy base;
2. with the hidden tests copied in, every ``fail_to_pass`` test fails and every
   ``pass_to_pass`` test passes;
3. on a fresh copy, ``expected_patch`` applies with ``git apply`` and then every
   ``fail_to_pass`` and ``pass_to_pass`` test passes (and nothing else fails);
4. ``task.md`` does not leak the hidden test names or the base commit.

Stdlib only for the Python tasks; pytest runs in a subprocess of the given interpreter. A task whose
metadata names ``"language": "go"`` or ``"javascript"`` is run with Crucible's own runner for it, in
its sandbox (``tasks.spec.run_task_tests``), so the interpreter must be the project's: steps 2 and 3
then count what ``go test -json`` or Vitest reported, and step 1 is left out (the tests sit beside the
code, and the snapshot carries none of its own).
Usage: python3 demo/check_tasks.py [--python PY] [TASK_DIR ...]
Exits 1 and says why when anything is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent
TASKS_DIR = DEMO_DIR / "tasks"
LANG_TASK_DIRS = (DEMO_DIR / "go_tasks", DEMO_DIR / "js_tasks")
REQUIRED = ("task_id", "repo", "base_commit", "test_command", "tests_dest", "fail_to_pass", "pass_to_pass")
# A Go or JavaScript task names its runner by its language; test_command is not read.
LANG_REQUIRED = ("task_id", "repo", "base_commit", "language", "tests_dest", "fail_to_pass", "pass_to_pass")
LANGUAGES = ("go", "javascript")
STATUSES = ("PASSED", "FAILED", "ERROR", "XFAIL", "XPASS")


class TaskProblem(Exception):
    pass


def run_pytest(python: str, repo: Path, timeout: int, args: tuple[str, ...] = ()) -> tuple[int, list[str]]:
    # No plugin autoload: the tasks need plain pytest, and an interpreter with many plugins
    # installed (Crucible's own venv) spends most of each short run importing them.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    # The task repos are not Django projects: an inherited settings module would make
    # pytest-django (if installed) fail every run.
    for name in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)
    try:
        proc = subprocess.run(
            [python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *args],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise TaskProblem(f"pytest timed out after {timeout}s in {repo.name}") from exc
    return proc.returncode, (proc.stdout + proc.stderr).splitlines()


def status_of(nodeid: str, lines: list[str]) -> str:
    """The -rA summary status of one node id, or MISSING."""
    for line in lines:
        for status in STATUSES:
            prefix = f"{status} {nodeid}"
            if line == prefix or line.startswith(prefix + " - "):
                return status
    return "MISSING"


def summary_ids(lines: list[str], status: str) -> list[str]:
    return [line[len(status) + 1 :].split(" - ", 1)[0] for line in lines if line.startswith(status + " ")]


def prepare(task: Path, meta: dict, dest: Path, patched: bool) -> Path:
    repo = dest / ("patched" if patched else "base")
    shutil.copytree(task / "repo_snapshot", repo, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    if patched:
        patch = (task / "expected_patch").resolve()
        # A repo of its own, so git apply never resolves paths against an enclosing checkout.
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        proc = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", str(patch)], cwd=repo, capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise TaskProblem(f"expected_patch does not apply: {proc.stderr.strip()}")
        shutil.rmtree(repo / ".git")
    shutil.copytree(task / "tests", repo / meta.get("tests_dest", "tests"), dirs_exist_ok=True)
    return repo


def check_lang_task(task: Path, meta: dict) -> str:
    """A Go or JavaScript task, run twice by Crucible's runner for its language: on the base, then patched."""
    if str(DEMO_DIR.parent) not in sys.path:
        sys.path.insert(0, str(DEMO_DIR.parent))
    from tasks.spec import TaskSpec, run_task_tests

    f2p, p2p = meta["fail_to_pass"], meta["pass_to_pass"]
    if not p2p:
        raise TaskProblem("no hidden test passes both before and after the patch")
    statement = (task / "task.md").read_text(encoding="utf-8")
    for test_id in f2p + p2p:
        name = test_id.split("::")[-1]
        if name in statement:
            raise TaskProblem(f"task.md mentions hidden test {name!r}")
    if meta["base_commit"] in statement:
        raise TaskProblem("task.md mentions the base commit")
    spec = TaskSpec.from_task_dir(task)
    problems: list[str] = []
    for when, patch in (("before patch", None), ("after patch", spec.expected_patch)):
        report = run_task_tests(spec, patch, backend="bwrap")
        if report.inconsistencies:
            problems.append(f"{when}: the run cannot be believed: {report.inconsistencies[:3]}")
        outcomes = {test_id: str(outcome.outcome) for test_id, outcome in report.tests.items()}
        if patch is None:
            for test_id in f2p:
                if outcomes.get(test_id, "missing") not in ("failed", "error"):
                    problems.append(
                        f"{when}: fail_to_pass {test_id} is {outcomes.get(test_id, 'missing')}, expected failed"
                    )
            expected_pass = p2p
        else:
            expected_pass = f2p + p2p
            broken = sorted(test_id for test_id, outcome in outcomes.items() if outcome != "passed")
            if broken:
                problems.append(f"{when}: not passing: {broken}")
        for test_id in expected_pass:
            if outcomes.get(test_id, "missing") != "passed":
                problems.append(f"{when}: {test_id} is {outcomes.get(test_id, 'missing')}, expected passed")
    if problems:
        raise TaskProblem("\n    ".join(problems))
    return f"{meta['repo']} ({meta['language']}): {len(f2p)} fail_to_pass, {len(p2p)} pass_to_pass"


def check_task(task: Path, python: str) -> str:
    meta_path = task / "metadata.json"
    if not meta_path.is_file():
        raise TaskProblem("metadata.json is missing")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    language = meta.get("language", "python")
    if language not in ("python", *LANGUAGES):
        raise TaskProblem(f"language {str(language)[:40]!r} is not python, go or javascript")
    missing = [key for key in (REQUIRED if language == "python" else LANG_REQUIRED) if key not in meta]
    if missing:
        raise TaskProblem(f"metadata.json lacks {', '.join(missing)}")
    if meta["task_id"] != task.name:
        raise TaskProblem(f"task_id {meta['task_id']!r} does not match directory {task.name!r}")
    for name in ("task.md", "repo_snapshot", "tests", "expected_patch"):
        if not (task / name).exists():
            raise TaskProblem(f"{name} is missing")
    if not meta["fail_to_pass"]:
        raise TaskProblem("fail_to_pass is empty")
    if language != "python":
        return check_lang_task(task, meta)
    f2p, p2p = meta["fail_to_pass"], meta["pass_to_pass"]
    if set(f2p) & set(p2p):
        raise TaskProblem(f"in both lists: {sorted(set(f2p) & set(p2p))}")
    hidden_files = {p.name for p in (task / "tests").rglob("*.py")}
    if not any(Path(t.split("::")[0]).name in hidden_files for t in p2p):
        raise TaskProblem("no hidden test passes both before and after the patch")

    statement = (task / "task.md").read_text(encoding="utf-8")
    for nodeid in f2p + p2p:
        name = nodeid.split("::")[-1].split("[")[0]
        if Path(nodeid.split("::")[0]).name in hidden_files and name in statement:
            raise TaskProblem(f"task.md mentions hidden test {name!r}")
    if meta["base_commit"] in statement:
        raise TaskProblem("task.md mentions the base commit")

    timeout = int(meta.get("timeout_seconds", 120))
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix=f"{task.name}-") as tmp:
        own = Path(tmp) / "own"
        shutil.copytree(task / "repo_snapshot", own, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        code, lines = run_pytest(python, own, timeout)
        if code != 0:
            broken = summary_ids(lines, "FAILED") + summary_ids(lines, "ERROR")
            problems.append(f"repo's own tests fail on the base: {broken}")

        _, lines = run_pytest(python, prepare(task, meta, Path(tmp), patched=False), timeout)
        for nodeid in f2p:
            status = status_of(nodeid, lines)
            if status not in ("FAILED", "ERROR"):
                problems.append(f"before patch: fail_to_pass {nodeid} is {status}, expected FAILED")
        for nodeid in p2p:
            status = status_of(nodeid, lines)
            if status != "PASSED":
                problems.append(f"before patch: pass_to_pass {nodeid} is {status}, expected PASSED")

        code, lines = run_pytest(python, prepare(task, meta, Path(tmp), patched=True), timeout)
        for nodeid in f2p + p2p:
            status = status_of(nodeid, lines)
            if status != "PASSED":
                problems.append(f"after patch: {nodeid} is {status}, expected PASSED")
        if code != 0:
            broken = summary_ids(lines, "FAILED") + summary_ids(lines, "ERROR") or lines[-5:]
            problems.append(f"after patch: pytest exit code {code}; not passing: {broken}")
    if problems:
        raise TaskProblem("\n    ".join(problems))
    return f"{meta['repo']}: {len(f2p)} fail_to_pass, {len(p2p)} pass_to_pass"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "tasks",
        nargs="*",
        type=Path,
        help="task directories (default: demo/tasks/task_*, demo/go_tasks/*, demo/js_tasks/*)",
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter that has pytest")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    args = parser.parse_args()

    # pytest runs with the task copy as cwd, so a relative interpreter path must be made absolute
    # (without resolving symlinks, which would step out of a virtualenv).
    if os.sep in args.python:
        args.python = os.path.abspath(args.python)
    lang_tasks = [task for folder in LANG_TASK_DIRS for task in sorted(folder.glob("*_*")) if task.is_dir()]
    tasks = args.tasks or [*sorted(TASKS_DIR.glob("task_*")), *lang_tasks]
    if not tasks:
        print(f"no task directories found under {TASKS_DIR}", file=sys.stderr)
        return 1
    if subprocess.run([args.python, "-m", "pytest", "--version"], capture_output=True).returncode != 0:
        print(f"{args.python} cannot run pytest; pass --python with one that can", file=sys.stderr)
        return 1

    def check(task: Path) -> tuple[Path, bool, str]:
        try:
            return task, True, check_task(task, args.python)
        except (
            TaskProblem,
            json.JSONDecodeError,
            OSError,
            subprocess.CalledProcessError,
            ValueError,
            RuntimeError,
        ) as exc:
            return task, False, str(exc)

    failed = 0
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for task, ok, message in pool.map(check, tasks):
            print(f"{'ok  ' if ok else 'FAIL'} {task.name}: {message}")
            failed += not ok
    print(f"\n{len(tasks) - failed} of {len(tasks)} tasks valid")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
