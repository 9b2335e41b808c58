"""What an evaluation reports: intervals that keep their width."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from evaluation.metrics import wilson_ci
from evaluation.models import EvalRun
from evaluation.services import compute_results
from tasks.models import TaskSuite
from trajectories.models import RolloutBatch, Trajectory


@pytest.fixture
def suite(db: None) -> TaskSuite:
    return TaskSuite.objects.create(name="held-out", split="eval")


def scored_run(suite: TaskSuite, outcomes: dict[str, list[bool]], k_values: list[int]) -> EvalRun:
    """An eval run whose batch holds scored samples with the given outcomes, task by task."""
    samples = max(len(o) for o in outcomes.values())
    batch = RolloutBatch.objects.create(suite=suite, policy_kind="scripted", samples=samples, status="succeeded")
    for task_id, results in outcomes.items():
        for i, success in enumerate(results):
            Trajectory.objects.create(
                trajectory_id=uuid.uuid4(),
                batch=batch,
                task_ref=task_id,
                sample_index=i,
                status="finished",
                success=success,
                scored_at=timezone.now(),
                created_at=timezone.now(),
            )
    return EvalRun.objects.create(
        suite=suite, policy_kind="scripted", samples=samples, k_values=k_values, temperature=0.8, batch=batch
    )


@pytest.mark.django_db
def test_the_report_keeps_an_interval_when_every_task_fails_every_task_passes_or_there_is_one_sample(
    suite: TaskSuite,
) -> None:
    tasks = ("t1", "t2", "t3")
    all_fail = compute_results(scored_run(suite, {t: [False, False] for t in tasks}, [1, 2]))
    assert all_fail["pass_at_k"] == {"1": 0.0, "2": 0.0}
    for k in ("1", "2"):
        assert all_fail["ci95"][k] == [0.0, pytest.approx(wilson_ci(0, 3)[1])] and all_fail["ci95"][k][1] > 0.5
    all_pass = compute_results(scored_run(suite, {t: [True, True] for t in tasks}, [1, 2]))
    assert all_pass["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert all_pass["ci95"]["2"] == [pytest.approx(wilson_ci(3, 3)[0]), 1.0] and all_pass["ci95"]["2"][0] < 0.5
    one = compute_results(scored_run(suite, {"t1": [True]}, [1]))
    assert one["pass_at_k"] == {"1": 1.0} and one["ci95"]["1"][0] < 0.25 and one["ci95"]["1"][1] == 1.0
    # pass@k itself is still the unbiased estimator: 1 of 2 samples gives pass@1 0.5, pass@2 1.
    mixed = compute_results(scored_run(suite, {"t1": [True, False], "t2": [False, False]}, [1, 2]))
    assert mixed["pass_at_k"] == {"1": 0.25, "2": 0.5}
    lo, hi = mixed["ci95"]["2"]
    assert lo < 0.5 < hi
