"""The building half of bench/real_history.py, run in a child process per repository:

    python -m bench._real_history_child REPO_JSON OUT_JSON

A child, because Django is set up once per process on the database the parent put in
DATABASE_URL (a private one, never a real deployment's), and because a repository that brings
the builder down must be that repository's crash, not the bench's. REPO_JSON is one row of
the corpus table ({"bundle", "repo", "licence", ...}) plus the options; the child clones the
bundle, runs `build_tasks --from-git --validate` into a suite of its own, scores each valid
task's expected patch (and the empty one) with the reward, and writes one JSON object to
OUT_JSON.
"""

from __future__ import annotations

import ast
import io
import json
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import django

EMPTY_BUILD = "no candidate became a task: "


def _empty_build_report(outcome: str, printed: str) -> dict[str, Any]:
    """A build whose every candidate was skipped stores no report; the command's refusal counts them
    by reason (its last line, a dict's repr) and its log says how the gate went, and the bench
    reports them as such, not as nothing."""
    line = next((ln for ln in outcome.splitlines() if ln.startswith(EMPTY_BUILD)), "")
    try:
        skipped = ast.literal_eval(line.removeprefix(EMPTY_BUILD))
    except (ValueError, SyntaxError):
        return {}
    if not isinstance(skipped, dict):
        return {}
    counts = {str(k): int(v) for k, v in skipped.items() if isinstance(v, int)}
    gate = next((ln for ln in printed.splitlines() if ln.startswith("repository gate at ")), "")
    passed = {"passed": True} if gate.split("(")[0].endswith(": passed ") else {}
    return {"candidates": sum(counts.values()), "built": 0, "skipped_by_reason": counts, "gate": passed}


def _timed_validation(spent: list[float]) -> None:
    """Time the validation step of the build: the command runs it after building, in one call,
    and reports no duration of its own; wrapping the pool it calls splits the two honestly."""
    from tasks.management.commands import _building

    inner = _building.validate_tasks

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    _building.validate_tasks = timed  # type: ignore[assignment]


def _measured(task: Any, row: dict[str, Any], timed: int) -> dict[str, Any]:
    """Test strength, and for the first few valid tasks validation against bare pytest."""
    from bench import _real_history_measures as measures
    from tasks.services import task_spec_for

    found: dict[str, Any] = {}
    try:
        spec = task_spec_for(task)
        if row.get("strength"):
            found["strength"] = measures.strength(spec, row["strength"])
        if timed < row.get("timed", 0):
            found["validation_vs_bare"] = measures.validation_vs_bare(
                spec, task.statement, task.expected_patch, row["licence"]
            )
    except Exception:
        found["measure_crash"] = traceback.format_exc()[-1000:]
    return found


def build(row: dict[str, Any]) -> dict[str, Any]:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from rewards.scoring import score_patch
    from rewards.spec import load_spec
    from tasks.builders import git_history, statements
    from tasks.models import Task, TaskSuite
    from tasks.services import task_spec_for

    call_command("migrate", verbosity=0)
    clone = Path(row["scratch"]) / "clones" / row["name"]
    subprocess.run(["git", "clone", "-q", row["bundle"], str(clone)], check=True, capture_output=True, timeout=300)
    suite = f"corpus-{row['name']}"
    validating: list[float] = []
    _timed_validation(validating)
    output = io.StringIO()
    started = time.perf_counter()
    outcome, crash = "", ""
    try:
        call_command(
            "build_tasks",
            "--from-git",
            str(clone),
            "--repo-name",
            row["repo"],
            "--suite",
            suite,
            "--license",
            row["licence"],
            "--max",
            str(row["max"]),
            "--validate",
            "--runs",
            str(row["runs"]),
            *(["--jobs", str(row["jobs"])] if row["jobs"] else []),
            verbosity=0,
            stdout=output,
            stderr=output,
        )
    except CommandError as exc:
        outcome = str(exc)
    except Exception:
        # Any other exception is this repository's crash, reported whole; the bench goes on.
        crash = traceback.format_exc()[-2000:]
    took = time.perf_counter() - started
    report = TaskSuite.objects.filter(name=suite).values_list("build_report", flat=True).first() or {}
    if not report and EMPTY_BUILD in outcome:
        report = _empty_build_report(outcome, output.getvalue())
    gate = report.get("gate") or {}
    if outcome and not (gate and not gate.get("passed")) and "no candidate became a task" not in outcome:
        crash = outcome  # a refusal that is neither the gate's nor an empty build: the command broke
    tasks: dict[str, dict[str, Any]] = {}
    spec = load_spec()
    scoring_started = time.perf_counter()
    for task in Task.objects.filter(suite__name=suite).order_by("task_id"):
        reasons = (task.validation_report or {}).get("reasons") or []
        entry: dict[str, Any] = {
            "status": task.validation_status,
            "reasons": [str(r)[:300] for r in reasons],
            "statement_quality": statements.quality(task.statement, task.expected_patch)["score"],
            "statement": task.statement[:400],
        }
        if task.validation_status == "valid" and row["score"]:
            try:
                scored = task_spec_for(task)
                expected = score_patch(scored, task.expected_patch, spec)
                entry["expected"] = expected.reward
                entry["expected_flags"] = [f.detector for f in expected.flags]
                if expected.flags:
                    # What took the reward, in the detectors' own words: the names alone do not say why.
                    entry["expected_evidence"] = [f"{f.detector}: {f.evidence[:600]}" for f in expected.flags]
                entry["empty"] = score_patch(scored, "", spec).reward
            except Exception:
                # A task that cannot be scored is a crash, named; the others are still scored.
                entry["score_crash"] = traceback.format_exc()[-1000:]
        if task.validation_status == "valid":
            entry |= _measured(task, row, timed=sum(1 for t in tasks.values() if "validation_vs_bare" in t))
        tasks[task.task_id] = entry
    score_s = time.perf_counter() - scoring_started
    qualities = [t["statement_quality"] for t in tasks.values()]
    validate_s = sum(validating)
    return {
        "bundle": Path(row["bundle"]).name,
        "repo": row["repo"],
        "licence": row["licence"],
        "candidates_in_bundle": len(git_history.candidates(clone)),
        "gate": gate,
        "outcome": outcome[:2000],
        "crash": crash,
        "report": {k: v for k, v in report.items() if k not in ("gate", "skipped", "validation")},
        "skipped": report.get("skipped", []),
        "build_s": round(took - validate_s, 1),
        "validate_s": round(validate_s, 1),
        "score_s": round(score_s, 1),
        "statement_quality_median": round(statistics.median(qualities), 2) if qualities else None,
        "tasks": tasks,
        "output_tail": output.getvalue()[-3000:],
    }


def main() -> None:
    row = json.loads(sys.argv[1])
    django.setup()
    result = build(row)
    Path(sys.argv[2]).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
