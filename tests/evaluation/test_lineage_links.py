"""Lineage links both ways: run ↔ checkpoint pages, evaluation ↔ checkpoint and run, eval rows → transcripts."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from evaluation.models import EvalRun
from tests.conftest import client_for
from tests.factories import SuiteFactory, TaskFactory, TrajectoryFactory
from training.models import Checkpoint, TrainingRun
from trajectories.models import RolloutBatch

pytestmark = pytest.mark.django_db

HOSTILE = '<b onmouseover="x()">t&1</b>'


def evaluated_checkpoint(task_id: str = "task_0001") -> tuple[TrainingRun, Checkpoint, EvalRun]:
    run = TrainingRun.objects.create(name="grpo", kind="grpo", status="succeeded")
    parent = Checkpoint.objects.create(name="base-sft", path="/runs/base")
    checkpoint = Checkpoint.objects.create(name="step-40", path="/runs/40", run=run, parent=parent, step=40)
    suite = SuiteFactory.create(name="held-out")
    batch = RolloutBatch.objects.create(suite=suite, policy_kind="hf", model=checkpoint.path, samples=2)
    task = TaskFactory.create(task_id=task_id, suite=suite)
    TrajectoryFactory.create(task=task, batch=batch)
    evaluation = EvalRun.objects.create(
        suite=suite,
        policy_kind="hf",
        model=checkpoint.path,
        checkpoint=checkpoint,
        batch=batch,
        samples=2,
        k_values=[1],
        temperature=0.8,
        status=EvalRun.Status.SUCCEEDED,
        results={"pass_at_k": {"1": 0.5}, "ci95": {"1": [0.1, 0.9]}, "tasks": [{"task_id": task_id, "n": 2, "c": 1}]},
    )
    return run, checkpoint, evaluation


def get(user: User, url: str) -> str:
    response = client_for(user).get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_run_page_links_each_checkpoint_its_parent_and_the_reward_vs_pass_page(researcher: User) -> None:
    run, checkpoint, _ = evaluated_checkpoint()
    page = get(researcher, reverse("training:run", args=[run.pk]))
    table = page[page.index('id="checkpoints"') :]
    assert f'href="{reverse("training:checkpoint", args=[checkpoint.pk])}"' in table
    assert f'href="{reverse("training:checkpoint", args=[checkpoint.parent_id])}"' in table
    assert f'href="{reverse("evaluation:reward-vs-pass", args=[run.pk])}"' in page


def test_the_evaluation_page_links_the_checkpoint_and_the_run(researcher: User) -> None:
    run, checkpoint, evaluation = evaluated_checkpoint()
    page = get(researcher, reverse("evaluation:detail", args=[evaluation.pk]))
    assert f'href="{reverse("training:checkpoint", args=[checkpoint.pk])}" id="eval-checkpoint"' in page
    assert f'href="{reverse("training:run", args=[run.pk])}" id="eval-training-run"' in page


def test_each_task_row_opens_the_trajectories_of_that_task_in_the_eval_batch(researcher: User) -> None:
    _, _, evaluation = evaluated_checkpoint(task_id="task_0007")
    page = get(researcher, reverse("evaluation:detail", args=[evaluation.pk]))
    row = page[page.index('data-task="task_0007"') :]
    href = row[row.index('href="') + 6 : row.index('"', row.index('href="') + 6)].replace("&amp;", "&")
    url = urlsplit(href)
    assert url.path == reverse("trajectories:list")
    assert parse_qs(url.query) == {"batch": [str(evaluation.batch_id)], "task": ["task_0007"]}
    # The link finds the task's trajectories in that batch.
    listing = get(researcher, href)
    assert str(evaluation.batch.trajectories.get().trajectory_id) in listing  # type: ignore[union-attr]


def test_a_hostile_task_id_is_escaped_in_the_row_and_its_link(researcher: User) -> None:
    _, _, evaluation = evaluated_checkpoint(task_id=HOSTILE)
    page = get(researcher, reverse("evaluation:detail", args=[evaluation.pk]))
    assert HOSTILE not in page
    assert "task=%3Cb%20onmouseover%3D%22x%28%29%22%3Et%261%3C%2Fb%3E" in page


def test_the_reward_vs_pass_page_links_the_run_and_each_point_checkpoint(researcher: User) -> None:
    run, checkpoint, evaluation = evaluated_checkpoint()
    page = get(researcher, reverse("evaluation:reward-vs-pass", args=[run.pk]))
    table = page[page.index('id="checkpoint-evals"') :]
    assert f'href="{reverse("training:checkpoint", args=[checkpoint.pk])}"' in table
    assert f'href="{reverse("evaluation:detail", args=[evaluation.pk])}"' in table
    assert f'href="{reverse("training:run", args=[run.pk])}"' in page


def test_a_run_that_logged_no_reward_says_so_beside_its_pass_at_k(researcher: User) -> None:
    run, _, _ = evaluated_checkpoint()
    TrainingRun.objects.filter(pk=run.pk).update(kind="sft")
    page = get(researcher, reverse("evaluation:reward-vs-pass", args=[run.pk]))
    assert 'id="no-reward"' in page and "a sft run logs its loss" in page
    run.metric_rows.create(step=1, values={"reward": 0.5})
    assert 'id="no-reward"' not in get(researcher, reverse("evaluation:reward-vs-pass", args=[run.pk]))
