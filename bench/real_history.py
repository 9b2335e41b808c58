"""Real history: the newest candidates of the sqlparse bundle built, validated and scored.

Acceptance (issue 19): of the newest 40 candidates, >= 30 valid tasks; every skipped candidate
has its reason and none aborts the build; every valid task scores 1.0 with its expected patch
and <= 0 with an empty one; validation time per candidate <= 2x the bare test runs it needs.
Plain Python (no database): the builder, validation and scoring are what the commands call.

BENCH_REAL_HISTORY_MAX      candidates looked at (default 40)
BENCH_REAL_HISTORY_RUNS     validation runs each way (default 1)
BENCH_REAL_HISTORY_SCORE    0 to skip scoring the valid tasks (default 1)
BENCH_REAL_HISTORY_SYNTH    synthetic tasks to make from the bundle's HEAD and validate (default 10; 0: none)
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from rewards.scoring import score_patch
from rewards.spec import load_spec
from tasks.builders import git_history, statements
from tasks.builders.common import BuildError
from tasks.builders.report import BuildReport
from tasks.builders.synthetic import synthesize
from tasks.spec import TaskSpec
from tasks.validation import validate

BUNDLE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "real-repos" / "sqlparse.bundle"
MAX = int(os.environ.get("BENCH_REAL_HISTORY_MAX", "40"))
RUNS = int(os.environ.get("BENCH_REAL_HISTORY_RUNS", "1"))
SCORE = os.environ.get("BENCH_REAL_HISTORY_SCORE", "1") != "0"
SYNTH = int(os.environ.get("BENCH_REAL_HISTORY_SYNTH", "10"))
NAME = "andialbrecht/sqlparse"


def _bare_run(task_dir: Path, patched: bool, scratch: Path) -> float:
    """One plain pytest run of the task on the host, as validation's sandboxed run does it."""
    work = scratch / f"bare-{task_dir.name}-{patched}"
    shutil.copytree(task_dir / "repo_snapshot", work)
    if patched:
        subprocess.run(["git", "apply", str(task_dir / "expected_patch")], cwd=work, check=True)
    metadata_dest = TaskSpec.from_task_dir(task_dir).tests_dest
    shutil.copytree(task_dir / "tests", work / metadata_dest, dirs_exist_ok=True)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=work,
        capture_output=True,
        # Plugin autoload off, as in the sandbox: Crucible's venv carries plugins (pytest-django,
        # hypothesis, playwright...) whose import alone costs ~0.7 s a run and would flatter the ratio.
        env={"PATH": os.environ["PATH"], "HOME": str(scratch), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        timeout=600,
    )
    took = time.perf_counter() - started
    shutil.rmtree(work, ignore_errors=True)
    return took


def _build(clone: Path, out: Path) -> BuildReport:
    found = git_history.candidates(clone)[:MAX]
    report = BuildReport("git_history", NAME, {"max": MAX}, candidates=len(found))
    for candidate in found:
        try:
            skip = git_history.judge(clone, candidate, 10, 400)
            if skip is not None:
                report.skip(candidate.commit, candidate.subject, *skip)
                continue
            task_dir = git_history.build_task(clone, candidate, out, {}, NAME, "BSD-3-Clause")
        except (BuildError, OSError) as exc:
            report.skip(candidate.commit, candidate.subject, git_history.SkipReason.BUILD_ERROR, str(exc))
            continue
        report.built.append(task_dir.name)
    return report


def _synthetic(clone: Path, out: Path) -> dict[str, Any]:
    """`synth_tasks` on the bundle's HEAD: how many of SYNTH mutants the tests notice become valid tasks."""
    started = time.perf_counter()
    report = BuildReport("synthetic_mutation", NAME)
    built = synthesize(clone, SYNTH, 0, out, name=NAME, report=report)
    statuses: Counter[str] = Counter()
    for task_dir in built:
        result = validate(
            TaskSpec.from_task_dir(task_dir),
            (task_dir / "task.md").read_text(),
            (task_dir / "expected_patch").read_text(),
            declared_license="BSD-3-Clause",
            license_allowlist=["BSD-3-Clause"],
            runs=RUNS,
            source="synthetic_mutation",
        )
        statuses[result.status] += 1
    return {
        "mutants_tried": report.candidates,
        "built": len(built),
        "statuses": dict(statuses),
        "seconds": round(time.perf_counter() - started, 1),
    }


def run() -> dict[str, Any]:
    spec = load_spec()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="crucible-bench-history-") as name:
        scratch = Path(name)
        clone = scratch / "sqlparse"
        subprocess.run(["git", "clone", "-q", str(BUNDLE), str(clone)], check=True, capture_output=True)
        started = time.perf_counter()
        report = _build(clone, scratch / "tasks")
        build_s = time.perf_counter() - started
        for task_id in report.built:
            task_dir = scratch / "tasks" / task_id
            task = TaskSpec.from_task_dir(task_dir)
            statement, patch = (task_dir / "task.md").read_text(), (task_dir / "expected_patch").read_text()
            started = time.perf_counter()
            result = validate(
                task, statement, patch, declared_license="BSD-3-Clause", license_allowlist=["BSD-3-Clause"], runs=RUNS
            )
            took = time.perf_counter() - started
            reasons = [c.reason for c in result.checks if not c.ok and c.hard]
            report.validated(task_id, result.status, reasons)
            row: dict[str, Any] = {
                "status": result.status,
                "reasons": reasons,
                "validate_s": round(took, 2),
                "statement_quality": statements.quality(statement, patch)["score"],
                "statement": statement[:600],
            }
            if result.status == "valid":
                # The bare runs validation needs: `RUNS` each way.
                bare = RUNS * (_bare_run(task_dir, False, scratch) + _bare_run(task_dir, True, scratch))
                row |= {"bare_runs_s": round(bare, 2), "ratio": round(took / bare, 2)}
                if SCORE:
                    scored = replace(
                        task, fail_to_pass=tuple(result.fail_to_pass), pass_to_pass=tuple(result.pass_to_pass)
                    )
                    row["expected"] = score_patch(scored, patch, spec).reward
                    row["empty"] = score_patch(scored, "", spec).reward
            rows[task_id] = row
            # Progress as it goes: a full run takes many minutes.
            print(f"real_history: {task_id} {row}", file=sys.stderr, flush=True)
        synthetic = _synthetic(clone, scratch / "synthetic") if SYNTH else {}
    data = report.to_json()
    valid = [r for r in rows.values() if r["status"] == "valid"]
    ratios = [float(r["ratio"]) for r in valid]
    return {
        "bundle": str(BUNDLE.name),
        "runs_each_way": RUNS,
        "build_s": round(build_s, 1),
        "report": data,
        "tasks": rows,
        "synthetic": synthetic,
        "summary": {
            "synthetic_valid": synthetic.get("statuses", {}).get("valid"),
            "candidates": data["candidates"],
            "built": data["built"],
            "valid": len(valid),
            "skipped_by_reason": data["skipped_by_reason"],
            "invalid_by_reason": dict(Counter(r for row in rows.values() for r in row["reasons"])),
            "expected_not_1": sorted(k for k, r in rows.items() if "expected" in r and r["expected"] != 1.0),
            "empty_above_0": sorted(k for k, r in rows.items() if "empty" in r and r["empty"] > 0),
            "median_ratio": round(statistics.median(ratios), 2) if ratios else None,
            "median_validate_s": round(statistics.median([r["validate_s"] for r in rows.values()]), 2)
            if rows
            else None,
        },
    }
