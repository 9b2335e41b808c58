"""A researcher launches a training run in the browser and watches its metrics arrive live."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from transformers import AutoModelForCausalLM

from tasks.services import import_task_dirs
from tests.conftest import DEMO, start_worker
from tests.training.runs import config, demo_verified_set, fake_trainer, verified_set
from tests.training.trainer_support import make_tiny_model
from training.launcher import execute
from training.models import TrainingRun
from training.services import create_run
from trajectories.models import RolloutBatch, Trajectory
from trajectories.services import import_trajectories

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


@pytest.mark.timeout(900)  # a real training step and a real rollout, on whatever machine this is
def test_an_sft_run_from_the_browser_trains_for_real_and_its_checkpoint_rolls_out_as_the_hf_policy(
    asgi_server: str, page: Any, researcher: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CRUCIBLE_TRAINER_MODULE", raising=False)
    monkeypatch.delenv("CRUCIBLE_TRAINING_LAUNCHER", raising=False)
    # One task (one hf trajectory to wait for) and the demo's verified trajectories of it.
    import_task_dirs(DEMO / "tasks" / "task_0001", "one")
    import_trajectories(DEMO / "trajectories.jsonl", allow_unknown_tasks=True)
    training_set = demo_verified_set()
    # No max_length: the trainer takes the longest row's (a value that cut a row's last assistant
    # turn would be refused). A tiny model of the bundled one's architecture and tokenizer: the
    # same TRL step, launcher and checkpoint path, in seconds (a step of the bundled model on a
    # busy 2-core machine takes minutes).
    raw = config(
        "sft",
        model={"base_model": str(make_tiny_model(tmp_path / "tiny"))},
        rl={"max_steps": 1, "batch_size": 1},
        data={"training_set": training_set},
    )
    raw["logging"] = {"save_every_steps": 1}
    worker = start_worker("training,rollouts")
    next(worker)
    try:
        login(page, asgi_server, researcher)
        page.goto(f"{asgi_server}/training/")
        page.fill("textarea[name=config]", yaml.safe_dump(raw))
        page.click("#launch-run button[type=submit]")
        page.wait_for_selector("h1:has-text('Training run #')")
        run = TrainingRun.objects.get()
        page.wait_for_function(
            "['succeeded', 'failed'].includes(document.getElementById('run-status').textContent)", timeout=600000
        )
        run.refresh_from_db()
        assert run.status == "succeeded", run.log_tail[-3000:]
        checkpoint = run.checkpoints.get()
        assert AutoModelForCausalLM.from_pretrained(checkpoint.path) is not None

        page.reload()  # the checkpoints table with its lineage and the rollout button
        row = page.locator(f"#checkpoints tr[data-checkpoint='{checkpoint.pk}']")
        row.locator("select[name=suite]").select_option("one")
        row.locator("input[name=max_steps]").fill("1")
        row.locator("button:has-text('Roll out with this checkpoint')").click()
        page.wait_for_selector("h1:has-text('Batch #')")
        batch = RolloutBatch.objects.get()
        assert batch.policy_kind == "hf" and batch.model == checkpoint.path and batch.max_steps == 1
        first = batch.trajectories.get()

        def finished() -> bool:
            return Trajectory.objects.get(pk=first.pk).status in ("finished", "failed")

        deadline = time.monotonic() + 300
        while not finished() and time.monotonic() < deadline:
            time.sleep(0.5)
        done = Trajectory.objects.get(pk=first.pk)
        assert done.status == "finished", done.error
        assert done.policy["model"] == checkpoint.path and done.step_count == 1
    finally:
        for _ in worker:
            pass
