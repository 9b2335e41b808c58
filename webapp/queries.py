from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, FloatField, Max, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, TruncHour
from django.utils import timezone

from tasks.models import Task, TaskSuite
from training.models import RunMetric
from trajectories.models import RolloutBatch, Step, Trajectory

HOURS = 24
METRIC_ROWS_MAX = 100_000  # a day of metric rows is small; a runaway logger must not stall the page


def dashboard_counts() -> dict[str, Any]:
    traj = Trajectory.objects.aggregate(
        total=Count("id"),
        succeeded=Count("id", filter=Q(success=True)),
        mean_reward=Avg("final_reward"),
    )
    tasks = Task.objects.aggregate(total=Count("id"), valid=Count("id", filter=Q(validation_status="valid")))
    return {
        "suites": TaskSuite.objects.count(),
        "tasks": tasks["total"],
        "valid_tasks": tasks["valid"],
        "trajectories": traj["total"],
        "succeeded": traj["succeeded"],
        "mean_reward": traj["mean_reward"],
        "recent": list(Trajectory.objects.select_related("suite").order_by("-created_at", "-id")[:10]),
        "rollouts": rollout_metrics(),
        "timeline": timeline(),
        "storage": storage_by_suite(),
    }


def storage_by_suite() -> list[dict[str, Any]]:
    """Per suite: rows in the database and what its archived batches hold in the object store."""
    rows: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"trajectories": 0, "steps": 0, "archived_batches": 0, "archived_steps": 0, "archive_bytes": 0}
    )
    for name, count in Trajectory.objects.values_list("suite__name").annotate(n=Count("id")):
        rows[name or "(no suite)"]["trajectories"] = count
    for name, count in Step.objects.values_list("trajectory__suite__name").annotate(n=Count("id")):
        rows[name or "(no suite)"]["steps"] = count
    archived = RolloutBatch.objects.filter(archived_at__isnull=False).values_list("suite__name")
    for name, batches, steps, size in archived.annotate(n=Count("id"), s=Sum("archived_steps"), b=Sum("archive_bytes")):
        rows[name].update(archived_batches=batches, archived_steps=steps or 0, archive_bytes=size or 0)
    return [{"suite": name, **figures} for name, figures in sorted(rows.items())]


def running_intervals(since: datetime, now: datetime) -> list[tuple[datetime, datetime]]:
    """The wall-clock spans (merged) during which at least one rollout batch was running."""
    batches = RolloutBatch.objects.filter(started_at__isnull=False, started_at__lt=now).exclude(finished_at__lt=since)
    spans = []
    rows = batches.values_list("pk", "started_at", "finished_at", "status")
    for batch_id, started, finished, status in rows:
        if started is None:
            continue
        if finished is None and status != RolloutBatch.Status.RUNNING:
            # Cancelled or failed without a finish time: it ran until its last trajectory's heartbeat.
            finished = Trajectory.objects.filter(batch_id=batch_id).aggregate(last=Max("heartbeat_at"))["last"]
        end = min(finished or now, now)
        start = max(started, since)
        if end > start:
            spans.append((start, end))
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def running_hours(spans: list[tuple[datetime, datetime]], start: datetime, end: datetime) -> float:
    return sum(max(0.0, (min(e, end) - max(s, start)).total_seconds()) for s, e in spans) / 3600


def per_hour(finished: int, hours: float) -> float | None:
    """Sampling throughput, defined once: finished trajectories per hour of wall time while rollouts ran.

    Idle hours do not dilute it (a day with one 10-minute batch of 100 is 600/hour, not 4), so it
    measures the pipeline's speed, as the batch page's figure for a single batch does.
    """
    return round(finished / hours, 1) if hours > 0 else None


def rollout_metrics(hours: int = HOURS) -> dict[str, Any]:
    """The dashboard's throughput figures (docs/scaling.md), over the last day of rollouts made here."""
    now = timezone.now()
    since = now - timedelta(hours=hours)
    recent = Trajectory.objects.filter(batch__isnull=False, status=Trajectory.Status.FINISHED, heartbeat_at__gte=since)
    startup = recent.aggregate(avg=Avg(Cast(KT("sandbox__startup_ms"), FloatField())))["avg"]
    latency = Step.objects.filter(trajectory__in=recent).aggregate(avg=Avg("duration_ms"))["avg"]
    finished = recent.count()
    active = running_hours(running_intervals(since, now), since, now)
    return {
        "per_hour": per_hour(finished, active),
        "finished": finished,
        "running_hours": round(active, 2),
        "running_minutes": round(active * 60, 1),
        "startup_ms": round(startup, 1) if startup is not None else None,
        "step_ms": round(latency, 1) if latency is not None else None,
        "training": training_throughput(since, now),
    }


def training_throughput(since: datetime, now: datetime) -> float | None:
    """Training throughput: optimizer steps per minute between logged metric rows (docs/scaling.md)."""
    steps, minutes = 0.0, 0.0
    for pairs in _metric_pairs(since, now).values():
        for (s0, t0), (s1, t1) in zip(pairs, pairs[1:], strict=False):
            steps += max(0, s1 - s0)
            minutes += (t1 - t0).total_seconds() / 60
    return round(steps / minutes, 2) if minutes > 0 else None


def _metric_pairs(since: datetime, now: datetime) -> dict[int, list[tuple[int, datetime]]]:
    rows = RunMetric.objects.filter(logged_at__gte=since, logged_at__lte=now).order_by("run_id", "logged_at", "step")
    out: dict[int, list[tuple[int, datetime]]] = defaultdict(list)
    for run_id, step, logged in rows.values_list("run_id", "step", "logged_at")[:METRIC_ROWS_MAX]:
        out[run_id].append((step, logged))
    return out


def timeline(hours: int = HOURS) -> dict[str, list[Any]]:
    """Hourly series for the dashboard's charts: sampling and training throughput, sandbox start-up."""
    now = timezone.now()
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    since = end - timedelta(hours=hours)
    spans = running_intervals(since, now)
    finished = Trajectory.objects.filter(
        batch__isnull=False, status=Trajectory.Status.FINISHED, heartbeat_at__gte=since
    )
    by_hour: dict[datetime, dict[str, Any]] = {
        row["hour"]: dict(row)
        for row in finished.annotate(hour=TruncHour("heartbeat_at"))
        .values("hour")
        .annotate(n=Count("id"), startup=Avg(Cast(KT("sandbox__startup_ms"), FloatField())))
    }
    metric_pairs = _metric_pairs(since, now)
    series: dict[str, list[Any]] = {"hour": [], "per_hour": [], "startup_ms": [], "steps_per_minute": []}
    for i in range(hours):
        start = since + timedelta(hours=i)
        stop = start + timedelta(hours=1)
        row: dict[str, Any] = by_hour.get(start, {})
        steps = minutes = 0.0
        for pairs in metric_pairs.values():
            for (s0, t0), (s1, t1) in zip(pairs, pairs[1:], strict=False):
                if start <= t1 < stop:
                    steps += max(0, s1 - s0)
                    minutes += (t1 - t0).total_seconds() / 60
        series["hour"].append(start.isoformat())
        series["per_hour"].append(per_hour(row.get("n", 0), running_hours(spans, start, stop)))
        series["startup_ms"].append(round(row["startup"], 1) if row.get("startup") is not None else None)
        series["steps_per_minute"].append(round(steps / minutes, 2) if minutes > 0 else None)
    return series
