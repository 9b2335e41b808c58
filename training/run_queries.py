"""Read helpers for training runs, shared by the run pages and the API."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from training.models import Checkpoint, RunMetric, TrainingRun

RUN_ROWS = 200
# The run page draws at most this many logged steps; a longer run's chart is its latest part.
METRIC_PAGE = 5000


def runs() -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related("created_by")[:RUN_ROWS]


def metric_rows(run: TrainingRun, after: int | None = None) -> list[dict[str, Any]]:
    """The latest page of logged steps, or (after=N) the steps after N in order: a page catching up."""
    rows = RunMetric.objects.filter(run=run)
    if after is None:
        latest = rows.order_by("-step", "-id").values_list("step", "values")[:METRIC_PAGE]
        return [{"step": step, "values": values} for step, values in reversed(latest)]
    later = rows.filter(step__gt=after).order_by("step", "id").values_list("step", "values")[:METRIC_PAGE]
    return [{"step": step, "values": values} for step, values in later]


def run_checkpoints(run: TrainingRun) -> QuerySet[Checkpoint]:
    return run.checkpoints.select_related("parent").order_by("step", "id")
