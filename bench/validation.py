"""Validation time per task against the bare test runs it needs, in one run.

Validating with N runs means 2N pytest runs (base and patched); the bare figure is
those same runs on the host without sandboxes, so the ratio is Crucible's overhead
(sandboxes, copies, secret and licence scans).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tasks.spec import TaskSpec
from tasks.validation import validate

DEMO = Path(__file__).resolve().parent.parent / "demo" / "tasks"
TASKS = os.environ.get("BENCH_VALIDATION_TASKS", "task_0001,task_0008,task_0013").split(",")
RUNS = int(os.environ.get("BENCH_VALIDATION_RUNS", "3"))


def _bare_runs(task_dir: Path, runs: int) -> float:
    total = 0.0
    with tempfile.TemporaryDirectory(prefix="crucible-bench-val-") as name:
        for patched in (False, True):
            work = Path(name) / f"repo-{patched}"
            shutil.copytree(task_dir / "repo_snapshot", work)
            if patched:
                subprocess.run(["git", "apply", str(task_dir / "expected_patch")], cwd=work, check=True)
            shutil.copytree(task_dir / "tests", work / "tests", dirs_exist_ok=True)
            for _ in range(runs):
                started = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                    cwd=work,
                    capture_output=True,
                    env={"PATH": os.environ["PATH"], "HOME": name},
                )
                total += time.perf_counter() - started
    return total


def run() -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for task_id in TASKS:
        task_dir = DEMO / task_id
        spec = TaskSpec.from_task_dir(task_dir)
        bare = _bare_runs(task_dir, RUNS)
        started = time.perf_counter()
        report = validate(
            spec,
            (task_dir / "task.md").read_text(),
            (task_dir / "expected_patch").read_text(),
            declared_license="MIT",
            license_allowlist=["MIT"],
            runs=RUNS,
        )
        took = time.perf_counter() - started
        rows[task_id] = {
            "status": report.status,
            "validate_s": round(took, 2),
            "bare_runs_s": round(bare, 2),
            "ratio": round(took / bare, 2),
        }
    ratios = [float(r["ratio"]) for r in rows.values()]
    seconds = [float(r["validate_s"]) for r in rows.values()]
    return {
        "runs_each_way": RUNS,
        "tasks": rows,
        "summary": {
            "median_ratio": round(statistics.median(ratios), 2),
            "median_validate_s": round(statistics.median(seconds), 2),
        },
    }
