from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Avg, Count, Q
from django.utils import timezone

from tasks.models import Task, TaskSuite
from trajectories.models import Step, Trajectory


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
    }


def rollout_metrics(hours: int = 24) -> dict[str, Any]:
    """Seed §8's three, over the last day of rollouts made here."""
    since = timezone.now() - timedelta(hours=hours)
    recent = Trajectory.objects.filter(batch__isnull=False, status=Trajectory.Status.FINISHED, heartbeat_at__gte=since)
    startups = [
        s["startup_ms"]
        for s in recent.values_list("sandbox", flat=True)
        if isinstance(s, dict) and isinstance(s.get("startup_ms"), int | float)
    ]
    latency = Step.objects.filter(trajectory__in=recent).aggregate(avg=Avg("duration_ms"))["avg"]
    return {
        "per_hour": round(recent.count() / hours, 1),
        "finished": recent.count(),
        "startup_ms": round(sum(startups) / len(startups), 1) if startups else None,
        "step_ms": round(latency, 1) if latency is not None else None,
    }
