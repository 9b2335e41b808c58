#!/usr/bin/env python3
"""Check that every demo task really is a task.

For each task directory (default: every ``task_*`` under ``demo/tasks``):

1. the repository's own tests pass on the buggy base;
2. with the hidden tests copied in, every ``fail_to_pass`` test fails and every
   ``pass_to_pass`` test passes;
3. on a fresh copy, ``expected_patch`` applies with ``git apply`` and then every
   ``fail_to_pass`` and ``pass_to_pass`` test passes (and nothing else fails);
4. ``task.md`` does not leak the hidden test names or the base commit.

Stdlib only; pytest runs in a subprocess of the given interpreter.
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

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
REQUIRED = ("task_id", "repo", "base_commit", "test_command", "tests_dest", "fail_to_pass", "pass_to_pass")
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


def check_task(task: Path, python: str) -> str:
    meta_path = task / "metadata.json"
    if not meta_path.is_file():
        raise TaskProblem("metadata.json is missing")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    missing = [key for key in REQUIRED if key not in meta]
    if missing:
        raise TaskProblem(f"metadata.json lacks {', '.join(missing)}")
    if meta["task_id"] != task.name:
        raise TaskProblem(f"task_id {meta['task_id']!r} does not match directory {task.name!r}")
    for name in ("task.md", "repo_snapshot", "tests", "expected_patch"):
        if not (task / name).exists():
            raise TaskProblem(f"{name} is missing")
    f2p, p2p = meta["fail_to_pass"], meta["pass_to_pass"]
    if not f2p:
        raise TaskProblem("fail_to_pass is empty")
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
    parser.add_argument("tasks", nargs="*", type=Path, help="task directories (default: demo/tasks/task_*)")
    parser.add_argument("--python", default=sys.executable, help="interpreter that has pytest")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    args = parser.parse_args()

    # pytest runs with the task copy as cwd, so a relative interpreter path must be made absolute
    # (without resolving symlinks, which would step out of a virtualenv).
    if os.sep in args.python:
        args.python = os.path.abspath(args.python)
    tasks = args.tasks or sorted(TASKS_DIR.glob("task_*"))
    if not tasks:
        print(f"no task directories found under {TASKS_DIR}", file=sys.stderr)
        return 1
    if subprocess.run([args.python, "-m", "pytest", "--version"], capture_output=True).returncode != 0:
        print(f"{args.python} cannot run pytest; pass --python with one that can", file=sys.stderr)
        return 1

    def check(task: Path) -> tuple[Path, bool, str]:
        try:
            return task, True, check_task(task, args.python)
        except (TaskProblem, json.JSONDecodeError, OSError, subprocess.CalledProcessError) as exc:
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
