"""The suite page's test-strength column: how many wrong versions of each fix its tests reject."""

from __future__ import annotations

import statistics
from typing import Any

from tasks.models import Task
from tasks.registry import SuiteColumn, register_suite_column


def strength_by_task(tasks: list[Task]) -> dict[int, dict[str, Any]]:
    """Each task's measured test strength (tasks.strength), from its last validation, if measured."""
    found = {}
    for task in tasks:
        measured = (task.validation_report or {}).get("test_strength")
        if isinstance(measured, dict) and measured:
            found[task.pk] = measured
    return found


def _summarise(tasks: list[Task], measured: dict[int, Any]) -> dict[str, Any]:
    scores = [m["score"] for m in measured.values() if isinstance(m.get("score"), (int, float))]
    return {
        "measured": len(measured),
        "median": round(statistics.median(scores), 2) if scores else None,
        "weak": [
            t
            for t in tasks
            if t.pk in measured and isinstance(measured[t.pk].get("score"), float) and measured[t.pk]["score"] < 0.5
        ],  # fmt: skip
        "brittle": [t for t in tasks if t.pk in measured and measured[t.pk].get("brittle")],
    }


def register() -> None:
    register_suite_column(
        SuiteColumn(
            key="test_strength",
            heading="Test strength",
            title="share of mutants of the fix the hidden tests kill; brittle: a rewrite of the fix rejected",
            load=strength_by_task,
            cell_template="tasks/_strength_cell.html",
            summary_template="tasks/_strength_summary.html",
            summarise=_summarise,
        )
    )
