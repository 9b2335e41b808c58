"""Runs overlaid: a chart per metric with a curve per run, the config keys they differ in, bad ids refused."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User

from tests.conftest import client_for
from training.models import RunMetric, TrainingRun

pytestmark = pytest.mark.django_db

HOSTILE = '<img src=x onerror="alert(1)">'


def run_with(name: str, learning_rate: str, losses: list[float], extra: dict[str, float] | None = None) -> TrainingRun:
    config = {"kind": "sft", "rl": {"learning_rate": learning_rate, "max_steps": len(losses)}, "data": {"x": "same"}}
    run = TrainingRun.objects.create(kind="sft", status="succeeded", name=name, config=config)
    for step, loss in enumerate(losses, start=1):
        RunMetric.objects.create(run=run, step=step, values={"loss": loss, **(extra or {})})
    return run


def test_two_runs_overlay_per_metric_with_their_config_differences(researcher: User) -> None:
    a = run_with("low lr", "1e-5", [2.0, 1.8, 1.7])
    b = run_with(HOSTILE, "1e-4", [2.0, 1.2], {"system_rss_mb": 900.0})
    client = client_for(researcher)
    listed = client.get("/training/").content.decode()
    assert f'name="run" value="{a.pk}"' in listed and 'id="overlay-form"' in listed

    response = client.get(f"/training/compare/?run={a.pk}&run={b.pk}")
    assert response.status_code == 200
    page = response.content.decode()
    series = json.loads(page.split('id="overlay-series" type="application/json">')[1].split("</script>")[0])
    assert [t["y"] for t in series["loss"]] == [[2.0, 1.8, 1.7], [2.0, 1.2]]
    assert [t["x"] for t in series["loss"]] == [[1, 2, 3], [1, 2]]
    assert len(series["system_rss_mb"]) == 1  # only the run that logged it
    diff = page[page.index('id="config-diff"') : page.index("</section>", page.index('id="config-diff"'))]
    assert "rl.learning_rate" in diff and "1e-05" not in diff and "1e-5" in diff and "1e-4" in diff
    assert "rl.max_steps" in diff and "data.x" not in diff  # the same in both: not a difference
    assert HOSTILE not in page and "&lt;img src=x" in page
    assert 'data-chart-group="loss"' in page and 'data-chart-group="system"' in page


def test_what_cannot_be_overlaid_is_refused_in_the_layout(researcher: User) -> None:
    run = run_with("one", "1e-5", [1.0])
    client = client_for(researcher)
    cases = [
        (f"?runs={run.pk}", "choose from 2 to 8 runs"),
        (f"?runs={run.pk},{run.pk}", "choose from 2 to 8 runs"),  # the same run twice is one run
        ("?runs=1,abc", "&#x27;abc&#x27; is not a run id"),
        (f"?runs={run.pk},99999", "no training run 99999"),
        ("?runs=" + ",".join(str(i) for i in range(1, 80)), "too many run ids"),
        ("", "choose from 2 to 8 runs"),
    ]
    for query, message in cases:
        response = client.get(f"/training/compare/{query}")
        page = response.content.decode()
        assert response.status_code == 400 and message in page and "<nav" in page, (query, page[-600:])
