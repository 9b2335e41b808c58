"""Finished eval runs made the real way (rollouts + the reward service), without a worker."""

from __future__ import annotations

from evaluation.models import EvalRun
from evaluation.services import refresh_eval, start_eval
from rewards.services import score_trajectory
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory

SMALL = ("task_0001", "task_0008", "task_0013")


def small_suite(name: str = "small-eval", tasks: tuple[str, ...] = SMALL) -> TaskSuite:
    for task_id in tasks:
        import_task_dirs(DEMO / "tasks" / task_id, name, "eval")
    return TaskSuite.objects.get(name=name)


def finished_eval(suite: TaskSuite, policy: str = "scripted", *, model: str = "", force: bool = False) -> EvalRun:
    run = start_eval(suite, RolloutSettings(policy, model), k_values=[1], force=force, enqueue=False)
    assert run.batch is not None
    for trajectory in run.batch.trajectories.order_by("id"):
        run_trajectory(trajectory.pk)
        score_trajectory(str(trajectory.trajectory_id))
    run = refresh_eval(run)
    assert run.status == EvalRun.Status.SUCCEEDED, run.status
    return run
