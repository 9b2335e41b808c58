"""Read helpers the evaluation pages, the API and the health page share."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from evaluation.diagnosis import Point
from evaluation.models import EvalRun
from training.models import RunMetric, TrainingRun
from trajectories.models import Trajectory

REWARD_KEYS = ("reward", "reward_mean", "rewards/mean")


def eval_runs() -> QuerySet[EvalRun]:
    return EvalRun.objects.select_related("suite", "checkpoint", "batch", "created_by")


def reward_of(values: object) -> float | None:
    if not isinstance(values, dict):
        return None
    for key in REWARD_KEYS:
        value = values.get(key)
        if isinstance(value, int | float):
            return float(value)
    return None


def reward_curve(run: TrainingRun) -> list[tuple[float, float]]:
    rows = RunMetric.objects.filter(run=run).order_by("step", "id").values_list("step", "values")
    return [(float(step), r) for step, values in rows if (r := reward_of(values)) is not None]


def interval_of(results: dict[str, Any], key: str) -> tuple[float, float]:
    """The 95 % interval the evaluation computed for pass@key; a report without one says nothing
    about its noise, so it gets the whole range (no trend can leave it)."""
    ci = results.get("ci95", {}).get(key) if isinstance(results.get("ci95"), dict) else None
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(v, int | float) for v in ci):
        return float(ci[0]), float(ci[1])
    return 0.0, 1.0


def checkpoint_evals(run: TrainingRun, k: int | None = None) -> list[tuple[Point, EvalRun]]:
    """(pass@k point with its interval, eval run): the latest finished eval of each checkpoint of the run."""
    latest: dict[int, EvalRun] = {}
    finished = eval_runs().filter(checkpoint__run=run, status=EvalRun.Status.SUCCEEDED).order_by("created_at", "id")
    for eval_run in finished:
        assert eval_run.checkpoint_id is not None
        latest[eval_run.checkpoint_id] = eval_run
    points = []
    for eval_run in latest.values():
        assert eval_run.checkpoint is not None
        key = str(k if k is not None else min(eval_run.k_values))
        value = eval_run.results.get("pass_at_k", {}).get(key)
        if isinstance(value, int | float):
            low, high = interval_of(eval_run.results, key)
            points.append((Point(float(eval_run.checkpoint.step), float(value), low, high), eval_run))
    return sorted(points, key=lambda p: p[0].step)


def reward_vs_pass_series(run: TrainingRun, k: int | None = None) -> tuple[list[tuple[float, float]], list[Point]]:
    return reward_curve(run), [point for point, _ in checkpoint_evals(run, k)]


def per_task_rates(run: EvalRun) -> dict[str, dict[str, Any]]:
    """task_id -> {"n", "c", "rate", "trajectories": [(trajectory_id, success)]}, for comparisons."""
    out: dict[str, dict[str, Any]] = {
        t["task_id"]: {"n": t["n"], "c": t["c"], "rate": t["c"] / t["n"] if t["n"] else 0.0, "trajectories": []}
        for t in run.results.get("tasks", [])
    }
    if run.batch_id is not None:
        rows = Trajectory.objects.filter(batch_id=run.batch_id).order_by("task_ref", "sample_index")
        for task_ref, trajectory_id, success in rows.values_list("task_ref", "trajectory_id", "success"):
            if task_ref in out:
                out[task_ref]["trajectories"].append((str(trajectory_id), success))
    return out
