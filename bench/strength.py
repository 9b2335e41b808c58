"""Test strength and brittleness of every demo task (tasks.strength), in sandboxed runs.

Per task: how many wrong versions of its fix (mutants of the lines the expected patch adds) the
hidden tests reject, which they let through, and whether a rewrite of the fix that does the same
is rejected (brittle). `task_0001` is weak on purpose (its tests never feed a byte-order mark, so
wrong versions of the BOM check pass): the check is that the measure says so, and that the others'
median stays high. The corpus repositories' tasks are measured by bench/real_history.py.

BENCH_STRENGTH_MUTANTS   wrong versions tried per task (default 8, tasks.strength's own)
BENCH_STRENGTH_TASKS     task ids, comma-separated (default every demo task)
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.checks import check
from tasks.spec import TaskSpec
from tasks.strength import MAX_MUTANTS, measure

DEMO = Path(__file__).resolve().parent.parent / "demo" / "tasks"
MUTANTS = int(os.environ.get("BENCH_STRENGTH_MUTANTS", str(MAX_MUTANTS)))
ONLY = [t for t in os.environ.get("BENCH_STRENGTH_TASKS", "").split(",") if t]
WEAK_ON_PURPOSE = "task_0001"
WEAK_BELOW = 0.9  # what `validate_tasks --min-test-strength 0.9` would refuse


def run() -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for task_dir in sorted(DEMO.glob("task_*")):
        if ONLY and task_dir.name not in ONLY:
            continue
        task = TaskSpec.from_task_dir(task_dir)
        started = time.perf_counter()
        found = measure(task, [*task.fail_to_pass, *task.pass_to_pass], "bwrap", max_mutants=MUTANTS)
        rows[task_dir.name] = found.to_json() | {"seconds": round(time.perf_counter() - started, 1)}
    scores = {name: r["score"] for name, r in rows.items() if r["score"] is not None}
    others = [s for name, s in scores.items() if name != WEAK_ON_PURPOSE]
    weak = scores.get(WEAK_ON_PURPOSE)
    checks = [check("demo tasks with a measured strength", len(scores), len(rows), better="higher")]
    if weak is not None:
        checks.append(check(f"{WEAK_ON_PURPOSE} (weak on purpose) strength", weak, WEAK_BELOW, better="lower"))
    if others:
        checks.append(check("the other demo tasks' median strength", statistics.median(others), 0.8, better="higher"))
    return {
        "mutants_per_task": MUTANTS,
        "tasks": rows,
        "summary": {
            "tasks": len(rows),
            "median_strength": round(statistics.median(scores.values()), 2) if scores else None,
            "weak": sorted(name for name, s in scores.items() if s < WEAK_BELOW),
            "brittle": sorted(name for name, r in rows.items() if r["brittle"]),
        },
        "checks": checks,
    }
