from __future__ import annotations

from typing import Any

from tasks.models import Task, TaskSuite
from trajectories.models import Step, Trajectory


def db_state() -> dict[str, list[Any]]:
    """Every row of Crucible's data tables, for 'nothing changed' assertions."""
    return {
        model.__name__: list(model.objects.order_by("pk").values()) for model in (TaskSuite, Task, Trajectory, Step)
    }
