from __future__ import annotations

from typing import Any

from django.db.models import Avg, Count, Q

from tasks.models import Task, TaskSuite
from trajectories.models import Trajectory


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
    }
