"""The run page lays its metric charts out by kind, and says when there is nothing to chart yet."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.conftest import client_for
from training.models import RunMetric, TrainingRun

pytestmark = pytest.mark.django_db

HOSTILE = '<img src=x onerror="alert(1)">'
GRPO_STEP = {
    "learning_rate": 1e-5,
    "loss": 0.4,
    "completions/mean_length": 120.0,
    "clip_ratio/high_mean": 0.0,
    "rewards/verified/mean": 0.5,
    "kl": 0.01,
    "num_tokens": 4096.0,
    "train_samples_per_second": 3.2,
    "tokens_per_s": 900.0,
    "completions/clipped_ratio": 0.1,
    "reward_std": 0.2,
    "entropy": 1.3,
    "system_cpu_percent": 180.0,
    "system_rss_mb": 950.5,
    HOSTILE: 1.0,
}


def page_of(researcher: User, run: TrainingRun) -> str:
    response = client_for(researcher).get(reverse("training:run", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_run_page_groups_its_charts_by_kind_in_a_fixed_order_each_titled(researcher: User) -> None:
    run = TrainingRun.objects.create(kind="grpo", status="succeeded", config={})
    RunMetric.objects.bulk_create(RunMetric(run=run, step=step, values=GRPO_STEP) for step in (1, 2))
    page = page_of(researcher, run)
    charts = page[page.index('id="metric-charts"') : page.index('id="run-metrics"')]
    sections = re.findall(r'data-chart-group="(\w+)">\s*<h3>([^<]+)</h3>(.*?)</section>', charts, re.S)
    assert [(kind, title) for kind, title, _ in sections] == [
        ("loss", "Loss"),
        ("reward", "Reward"),
        ("kl", "KL, entropy and policy clipping"),
        ("throughput", "Throughput"),
        ("lengths", "Lengths"),
        ("system", "System: CPU, memory, GPU"),
        ("other", "Other"),
    ]
    in_group = {kind: re.findall(r'class="metric-chart" data-metric="([^"]+)"', body) for kind, _, body in sections}
    assert in_group == {
        "loss": ["loss"],
        "reward": ["reward_std", "rewards/verified/mean"],
        "kl": ["clip_ratio/high_mean", "entropy", "kl"],
        "throughput": ["num_tokens", "tokens_per_s", "train_samples_per_second"],
        "lengths": ["completions/clipped_ratio", "completions/mean_length"],
        "system": ["system_cpu_percent", "system_rss_mb"],
        "other": ["&lt;img src=x onerror=&quot;alert(1)&quot;&gt;", "learning_rate"],
    }
    assert HOSTILE not in charts
    assert 'id="metrics-empty" class="muted" hidden' in page
    # The script sorts metrics first seen live by the same rules, in the same order.
    rules = json.loads(page.split('id="chart-rules" type="application/json">')[1].split("</script>")[0])
    assert [rule["kind"] for rule in rules] == [kind for kind, _, _ in sections]


def test_a_run_without_metrics_says_what_is_missing_and_when_it_comes(researcher: User) -> None:
    queued = TrainingRun.objects.create(kind="sft", status="queued", config={})
    page = page_of(researcher, queued)
    assert (
        "No metrics yet: the first arrive after the first logged step, once a training worker starts the run." in page
    )
    assert "data-chart-group" not in page
    failed = TrainingRun.objects.create(kind="sft", status="failed", config={})
    assert "No metrics were logged: the run ended (failed) before its first logged step." in page_of(researcher, failed)


def test_the_run_page_says_whether_the_run_lowered_its_loss_on_its_own_rows(researcher: User) -> None:
    learned = {"held_in_loss_before": 2.5, "held_in_loss_after": 2.1, "held_in_rows": 16.0}
    run = TrainingRun.objects.create(kind="sft", status="succeeded", config={}, metrics=learned)
    page = page_of(researcher, run)
    assert 'id="run-learned"' in page and "loss on 16 of its own rows 2.5000 &rarr; 2.1000" in page
    assert '<span class="badge ok">lower</span>' in page
    TrainingRun.objects.filter(pk=run.pk).update(metrics={**learned, "held_in_loss_after": 2.5})
    assert '<span class="badge bad"' in page_of(researcher, run)
    untried = TrainingRun.objects.create(kind="grpo", status="succeeded", config={}, metrics={"loss": 1.0})
    assert 'id="run-learned"' not in page_of(researcher, untried)
