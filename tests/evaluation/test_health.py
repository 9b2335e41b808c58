"""The health page binds each row of the troubleshooting table to a live signal."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from evaluation.health import diagnosis_rows
from evaluation.models import EvalRun
from tasks.models import Task, TaskSuite
from tests.conftest import client_for
from tests.evaluation.helpers import small_suite
from training.models import Checkpoint, RunMetric, TrainingRun
from trajectories.models import Trajectory


def row(page: str, key: str) -> str:
    match = re.search(rf'<tr data-row="{key}" class="([^"]*)">(.*?)</tr>', page, re.S)
    assert match, key
    return match.group(1) + match.group(2)


def plant_trajectories(duplicate_rate: float, startup_ms: float, count: int = 4) -> None:
    for _ in range(count):
        Trajectory.objects.create(
            trajectory_id=uuid.uuid4(),
            task_ref="task_0001",
            created_at=timezone.now(),
            status="finished",
            duplicate_rate=duplicate_rate,
            sandbox={"backend": "bwrap", "startup_ms": startup_ms},
        )


@pytest.mark.django_db
def test_a_quiet_system_raises_no_alert(reviewer: User) -> None:
    plant_trajectories(0.05, 12.0)
    page = client_for(reviewer).get(reverse("health")).content.decode()
    for key in ("reward_gamed", "duplicates", "kl_spikes", "sandbox_startup", "overfitting", "flaky_tasks", "sizes"):
        assert not row(page, key).startswith("alert"), key
    for key in ("reward_misses_progress", "unstable", "leak_or_lenient", "pass_at_k_falling"):
        assert not row(page, key).startswith("alert") and "none of the latest 10 runs" in row(page, key), key
    assert "12.0 ms average" in row(page, "sandbox_startup")
    assert "queued: default" in row(page, "queues")  # live queue depths from Redis


@pytest.mark.django_db
def test_planted_symptoms_raise_their_rows_with_the_guides_fix(reviewer: User) -> None:
    suite = small_suite()
    plant_trajectories(0.6, 2500.0)
    gamed = TrainingRun.objects.create(kind="grpo")
    for step in range(0, 101, 10):
        RunMetric.objects.create(run=gamed, step=step, values={"reward": step / 120})
    for step, value in ((30, 0.3), (60, 0.31), (100, 0.3)):
        checkpoint = Checkpoint.objects.create(name=f"c{step}", path="/x", run=gamed, step=step)
        EvalRun.objects.create(
            suite=suite,
            policy_kind="hf",
            checkpoint=checkpoint,
            samples=1,
            k_values=[1],
            temperature=0.8,
            status="succeeded",
            results={"pass_at_k": {"1": value}, "ci95": {"1": [value - 0.02, value + 0.02]}},
        )
    Task.objects.filter(task_id__in=["task_0001", "task_0008"]).update(validation_status="flaky")
    run = TrainingRun.objects.create(kind="grpo", metrics={"loss": 0.2, "eval_loss": 0.9})
    for step, kl in enumerate([0.01, 0.012, 0.011, 0.9, 0.013]):
        RunMetric.objects.create(run=run, step=step * 10, values={"kl": kl, "reward": 0.1 * step})
    page = client_for(reviewer).get(reverse("health")).content.decode()
    duplicates = row(page, "duplicates")
    assert duplicates.startswith("alert") and "60% of steps repeat" in duplicates
    assert "add a repeated-action penalty to the reward function" in duplicates
    kl_row = row(page, "kl_spikes")
    assert kl_row.startswith("alert") and f"run {run.pk}: kl 0.9" in kl_row
    assert "raise kl_coef, lower the learning rate" in kl_row
    startup = row(page, "sandbox_startup")
    assert startup.startswith("alert") and "pre-build images, reuse containers" in startup
    flaky = row(page, "flaky_tasks")
    assert flaky.startswith("alert") and "2 task(s) quarantined" in flaky
    assert row(page, "overfitting").startswith("alert")
    reward = row(page, "reward_gamed")
    assert reward.startswith("alert") and f'href="/evaluation/training-runs/{gamed.pk}/"' in reward
    assert "make test files read-only and add the anti-cheat check" in reward
    # Six planted; the queue row may add one when earlier tests left jobs in the test broker.
    alerts = page.count('class="alert"')
    assert alerts >= 6 and f'id="alert-count">{alerts} alerts' in page


def diagnosed_run(suite: TaskSuite, reward: list[float], passes: list[float], half: float = 0.02) -> TrainingRun:
    """A training run with a reward curve over steps 0-100 and an evaluated checkpoint at each pass@1."""
    run = TrainingRun.objects.create(kind="grpo")
    for i, value in enumerate(reward):
        RunMetric.objects.create(run=run, step=i * 10, values={"reward": value})
    for i, value in enumerate(passes):
        step = 20 + i * 80 // max(1, len(passes) - 1)
        checkpoint = Checkpoint.objects.create(name=f"r{run.pk}-c{i}", path="/x", run=run, step=step)
        EvalRun.objects.create(
            suite=suite,
            policy_kind="hf",
            checkpoint=checkpoint,
            samples=1,
            k_values=[1],
            temperature=0.8,
            status="succeeded",
            results={"pass_at_k": {"1": value}, "ci95": {"1": [max(0.0, value - half), min(1.0, value + half)]}},
        )
    return run


@pytest.mark.django_db
def test_every_shape_of_the_reward_vs_pass_at_k_table_has_a_row_that_names_its_runs() -> None:
    suite = TaskSuite.objects.create(name="held-out", split="eval")
    flat_reward = [0.10, 0.12, 0.10, 0.11, 0.10, 0.12, 0.11, 0.10, 0.12, 0.11, 0.11]
    misses = diagnosed_run(suite, flat_reward, [0.1, 0.2, 0.3, 0.4, 0.5])
    falling = diagnosed_run(suite, flat_reward, [0.5, 0.4, 0.3, 0.2])
    unstable = diagnosed_run(
        suite, [0.2, 0.6, 0.2, 0.6, 0.2, 0.6, 0.2, 0.6, 0.2, 0.6, 0.2], [0.1, 0.4, 0.1, 0.4, 0.1, 0.4, 0.1, 0.4, 0.1]
    )
    leak = diagnosed_run(suite, [0.2, 0.97, 0.99, 0.98, 1.0, 0.99, 1.0, 1.0, 0.99, 1.0, 1.0], [0.2, 0.3, 0.4])
    # A five-task suite's wide intervals: whatever the reward does, no shape is claimed.
    noisy = diagnosed_run(suite, [0.08 * i for i in range(11)], [0.2, 0.2, 0.4, 0.2, 0.2], half=0.3)
    rows = {r["key"]: r for r in diagnosis_rows()}
    assert list(rows) == ["reward_gamed", "reward_misses_progress", "unstable", "leak_or_lenient", "pass_at_k_falling"]
    for key, run in (
        ("reward_misses_progress", misses),
        ("pass_at_k_falling", falling),
        ("unstable", unstable),
        ("leak_or_lenient", leak),
    ):
        assert rows[key]["alert"] and rows[key]["value"] == f"run {run.pk}", key
        assert rows[key]["evidence"] == f"/evaluation/training-runs/{run.pk}/", key
    assert "compare the last checkpoint with the first task by task" in rows["pass_at_k_falling"]["fix"]
    assert not rows["reward_gamed"]["alert"] and f"run {noisy.pk}" not in rows["reward_gamed"]["value"]
