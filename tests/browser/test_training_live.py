"""A researcher launches a training run in the browser and watches its metrics arrive live."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.conftest import start_worker
from tests.training.runs import config, fake_trainer, verified_set
from training.launcher import execute
from training.models import TrainingRun
from training.services import create_run

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]
__all__ = ["fake_trainer"]


# A run chart by metric name (names are compared, never put in a selector).
CHART = "(name => [...document.querySelectorAll('.metric-chart')].find((el) => el.dataset.metric === name))"
CHART_GROUPS = """Object.fromEntries([...document.querySelectorAll('.metric-chart')].map(
    (el) => [el.dataset.metric, el.closest('[data-chart-group]').dataset.chartGroup]))"""
X_TICKS = f"{CHART}('loss')._fullLayout.xaxis._vals.map((tick) => tick.text)"


def login(page: Any, server: str, user: Any) -> None:
    page.goto(f"{server}/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")


def test_the_run_page_chart_shows_metrics_arriving_live(
    asgi_server: str, page: Any, researcher: Any, fake_trainer: Callable[..., None]
) -> None:
    verified_set()
    fake_trainer("slow", step_s=1.0)
    worker = start_worker("training")
    next(worker)
    try:
        login(page, asgi_server, researcher)
        page.goto(f"{asgi_server}/training/")
        page.select_option("#config-example", "dpo")
        assert "kind: dpo" in page.input_value("textarea[name=config]")
        page.fill("textarea[name=config]", yaml.safe_dump(config("sft", rl={"max_steps": 6})))
        page.click("#launch-run button[type=submit]")
        page.wait_for_selector("h1:has-text('Training run #')")
        page.evaluate("window.__notReloaded = true")
        run = TrainingRun.objects.get()
        # Points are drawn as they come, not only at the end: the chart has some before the run ends.
        page.wait_for_function("Number(document.getElementById('run').dataset.points || 0) >= 2", timeout=60000)
        early = page.evaluate("document.querySelector('.metric-chart[data-metric=loss]').data[0].x.length")
        assert TrainingRun.objects.get(pk=run.pk).status == "running" and 2 <= early < 6
        page.wait_for_function("document.getElementById('run-status').textContent === 'succeeded'", timeout=60000)
        page.wait_for_function("document.querySelector('.metric-chart[data-metric=loss]').data[0].x.length === 6")
        assert page.evaluate("document.querySelector('.metric-chart[data-metric=loss]').data[0].x") == [
            1,
            2,
            3,
            4,
            5,
            6,
        ]
        assert page.evaluate("window.__notReloaded") is True
        # Charts first seen live land in their kind's group; the empty state gives way to them.
        assert page.evaluate(CHART_GROUPS) == {
            "loss": "loss",
            "learning_rate": "other",
            "grad_norm": "other",
            "steps_per_min": "throughput",
        }
        assert page.is_hidden("#metrics-empty")
        # Whole steps on the x axis; a constant learning rate of 1e-5 on a range fitted to it, not -1..1.
        assert page.evaluate(X_TICKS) == ["1", "2", "3", "4", "5", "6"]
        low, high = page.evaluate(f"{CHART}('learning_rate')._fullLayout.yaxis.range")
        assert 0 < low < 1e-5 < high < 2e-5
        # Smoothing draws an average over the faint raw points; 0 leaves the raw points alone.
        assert page.evaluate(f"{CHART}('loss').data[1].y.length") == 6
        assert page.evaluate(f"{CHART}('loss').data[0].opacity") < 1
        page.fill("#chart-smoothing", "0")
        assert page.evaluate(f"{CHART}('loss').data[1].y.length") == 0
        assert page.evaluate(f"{CHART}('loss').layout.yaxis.type") == "linear"  # 2 to 1/3: within 10x
        page.select_option("#chart-scale", "log")
        assert page.evaluate(f"{CHART}('loss').layout.yaxis.type") == "log"
        assert page.locator("#checkpoints tr[data-checkpoint]").count() >= 3  # steps 2, 4, 6, live

        # A failed run shows its log tail (run here: the worker keeps the slow trainer it started with).
        fake_trainer("fail")
        failed = create_run(config("sft"), researcher, enqueue=False)
        # Not on this thread: Playwright's event loop runs here, and publishing needs its own.
        runner = threading.Thread(target=execute, args=(failed.pk,))
        runner.start()
        runner.join(60)
        page.goto(f"{asgi_server}/training/{failed.pk}/")
        assert page.inner_text("#run-status") == "failed"
        assert "RuntimeError: the fake trainer was told to fail" in page.inner_text("#log-tail")
        assert "trainer exited with code 3" in page.inner_text("#run-error")
    finally:
        for _ in worker:
            pass
