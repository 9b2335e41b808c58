from __future__ import annotations

from typing import Any

from core import states
from tasks.models import Task, TaskSuite
from training.models import TrainingRun
from trajectories.models import Step, Trajectory


def db_state() -> dict[str, list[Any]]:
    """Every row of Crucible's data tables, for 'nothing changed' assertions."""
    return {
        model.__name__: list(model.objects.order_by("pk").values()) for model in (TaskSuite, Task, Trajectory, Step)
    }


def running_lease(trajectory: Trajectory) -> states.Lease:
    """A trajectory made by a test, running under a first attempt: what a claim would have left."""
    Trajectory.objects.filter(pk=trajectory.pk).update(status=Trajectory.Status.RUNNING, attempt=1)
    return states.Lease(Trajectory, trajectory.pk, 1)


def running_run(run: TrainingRun) -> states.Lease:
    """A training run made by a test, running under a first attempt, as a launcher's claim leaves it."""
    TrainingRun.objects.filter(pk=run.pk).update(status=TrainingRun.Status.RUNNING, attempt=1)
    return states.Lease(TrainingRun, run.pk, 1)
