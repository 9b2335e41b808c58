"""What an evaluation reports, wherever it is read: intervals that keep their width, a forced run's
warning, the reward-vs-pass@k page without data, and the launch form's own words."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from evaluation.forms import EvalRunForm
from evaluation.metrics import wilson_ci
from evaluation.models import EvalRun
from evaluation.services import compute_results, design_report
from tasks.models import TaskSuite
from tests.conftest import client_for
from training.models import Checkpoint, RunMetric, TrainingRun
from trajectories.models import RolloutBatch, Trajectory

HOSTILE = "<script>alert(1)</script>"
FORCED = f"FORCED despite overlap: the eval suite overlaps training data in 1 place ({HOSTILE})."


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


@pytest.mark.django_db
def test_the_reward_vs_pass_at_k_page_without_points_says_what_is_missing_and_how_to_get_it(reviewer: User) -> None:
    run = TrainingRun.objects.create(kind="grpo")
    for step in (0, 10, 20):
        RunMetric.objects.create(run=run, step=step, values={"reward": step / 40})
    first = Checkpoint.objects.create(name="ckpt-10", path="/x", run=run, step=10)
    Checkpoint.objects.create(name="rm", path="/rm", run=run, step=10, kind="reward")
    html = client_for(reviewer).get(reverse("evaluation:reward-vs-pass", args=[run.pk])).content.decode()
    assert 'id="no-data"' in html
    assert 'id="reward-vs-pass"' not in html and "reward-vs-pass-data" not in html  # no empty chart
    assert "no evaluated checkpoints" in html and "curve (3 logged steps)" in html
    assert "Evaluate two or more of its checkpoints" in html and "--checkpoint ID" in html
    checkpoint_page = reverse("training:checkpoint", args=[first.pk])
    assert f'id <code>{first.pk}</code> <a href="{checkpoint_page}">ckpt-10</a> (step 10)' in html
    assert "rm</a> (step" not in html

    bare = TrainingRun.objects.create(kind="sft")
    html = client_for(reviewer).get(reverse("evaluation:reward-vs-pass", args=[bare.pk])).content.decode()
    assert 'id="no-data"' in html and "no training reward logged yet" in html
    assert "saved no policy checkpoint yet" in html


@pytest.mark.django_db
def test_a_bad_k_is_shown_once_beside_its_field_in_the_pages_words(suite: TaskSuite, researcher: User) -> None:
    response = client_for(researcher).post(
        reverse("evaluation:list"), {"suite": suite.name, "policy": "scripted", "k": "one", "temperature": "0.8"}
    )
    html = response.content.decode()
    assert response.status_code == 400
    message = "k must be positive whole numbers separated by commas, e.g. 1,5 (got &#x27;one&#x27;)"
    assert html.count(message) == 1 and "--k" not in html
    assert f'id="error-k">{message}</span>' in html
    assert EvalRun.objects.count() == 0


@pytest.mark.django_db
def test_the_launch_form_takes_max_steps_within_the_rollout_limits(suite: TaskSuite, researcher: User) -> None:
    form = EvalRunForm({"suite": suite.name, "policy": "scripted", "k": "1", "max_steps": "3"})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["rollout"].max_steps == 3
    unset = EvalRunForm({"suite": suite.name, "policy": "scripted", "k": "1"})
    assert unset.is_valid() and unset.cleaned_data["rollout"].max_steps == 30
    too_many = EvalRunForm({"suite": suite.name, "policy": "scripted", "k": "1", "max_steps": "201"})
    assert not too_many.is_valid() and "max_steps" in too_many.errors
    assert 'name="max_steps"' in client_for(researcher).get(reverse("evaluation:list")).content.decode()


@pytest.mark.django_db
def test_a_forced_run_says_so_in_the_json_report_the_api_and_every_page(suite: TaskSuite, reviewer: User) -> None:
    results = {
        "suite": suite.name,
        "policy": "hf",
        "model": "m",
        "n": 1,
        "pass_at_k": {"1": 0.5},
        "pass_hat_k": {"1": 0.5},
        "ci95": {"1": [0.1, 0.9]},
        "tasks": [{"task_id": "t1", "n": 1, "c": 1}, {"task_id": "t2", "n": 1, "c": 0}],
    }
    training = TrainingRun.objects.create(kind="grpo")
    runs = []
    for step, forced in ((10, False), (20, True)):
        checkpoint = Checkpoint.objects.create(name=f"c{step}", path="/x", run=training, step=step)
        runs.append(
            EvalRun.objects.create(
                suite=suite,
                policy_kind="hf",
                checkpoint=checkpoint,
                samples=1,
                k_values=[1],
                temperature=0.8,
                status="succeeded",
                results=results,
                forced=forced,
                warning=FORCED if forced else "",
            )
        )
    clean, forced_run = runs
    assert design_report(forced_run)["warning"] == FORCED and design_report(clean)["warning"] == ""

    client = client_for(reviewer)
    body = client.get(f"/api/v1/eval-runs/{forced_run.pk}/").json()
    assert body["forced"] is True and body["warning"] == FORCED
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    pages = {
        "detail": reverse("evaluation:detail", args=[forced_run.pk]),
        "compare": f"{reverse('evaluation:compare')}?a={clean.pk}&b={forced_run.pk}",
        "reward-vs-pass": reverse("evaluation:reward-vs-pass", args=[training.pk]),
    }
    html = {name: client.get(url).content.decode() for name, url in pages.items()}
    for name, page in html.items():
        assert escaped in page and HOSTILE not in page, name
    assert 'id="eval-warning"' in html["detail"]
    assert 'id="warning-b"' in html["compare"] and 'id="warning-a"' not in html["compare"]
    chart_page = html["reward-vs-pass"]
    assert 'id="forced-evals"' in chart_page and f"eval #{forced_run.pk}</a>" in chart_page
    assert chart_page.count(">forced</span>") == 1
