"""Actions on the trajectory page answer in place: rescore and replay show progress and then
their result live (a real worker, the real ASGI server), labels and marks appear without a
reload, `c` undoes `e`, and the pages log no console errors."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, start_worker
from tests.factories import StepFactory, TrajectoryFactory
from trajectories.batches import start_batch
from trajectories.models import Trajectory
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def unscored_rollout(monkeypatch: pytest.MonkeyPatch) -> Trajectory:
    import rewards.receivers

    # Scored only when the test presses the button, not by the usual job after the rollout.
    monkeypatch.setattr(rewards.receivers.score_trajectory_job, "delay", lambda pk: None)
    import_task_dirs(DEMO / "tasks" / "task_0001", "feedback")
    batch = start_batch(TaskSuite.objects.get(name="feedback"), RolloutSettings("scripted"), enqueue=False)
    # In a thread of its own: the rollout publishes live events through async_to_sync, which
    # cannot run in this thread while Playwright's event loop does.
    with ThreadPoolExecutor(1) as pool:
        trajectory = pool.submit(lambda: run_trajectory(batch.trajectories.get().pk)).result()
    assert trajectory is not None and trajectory.scored_at is None
    monkeypatch.undo()
    return trajectory


def sign_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")


def test_rescore_replay_labels_and_marks_answer_on_the_page(
    asgi_server: str, page: Any, researcher: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    trajectory = unscored_rollout(monkeypatch)
    worker = start_worker("rewards,rollouts")
    next(worker)
    try:
        sign_in(page, asgi_server, researcher.username)
        badge = page.locator(".topbar .badge")
        assert badge.inner_text() == "researcher"
        colours = badge.evaluate("b => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]")
        assert colours[0] != colours[1] and colours[0] != "rgb(255, 255, 255)"  # readable, not white on white

        page.goto(f"{asgi_server}/trajectories/{trajectory.trajectory_id}/")
        page.evaluate("window.__notReloaded = true")
        # Listen beside the page's own handler: the jobs' events must reach the browser.
        page.evaluate(
            """() => { window.__heard = [];
            CrucibleLive.subscribe(document.getElementById('steps').dataset.group,
                                   (e) => window.__heard.push(`${e.kind}:${e.state}`)); }"""
        )
        assert "not scored by Crucible yet" in page.inner_text("#verified-reward")

        page.click("text=Score with the current reward spec")
        page.wait_for_function(
            "document.getElementById('verified-reward').textContent.includes('verified')", timeout=60000
        )
        page.wait_for_selector("#test-results")  # the per-test results arrive with the score
        assert "1.000" in page.inner_text("#rescore-status")

        page.click("text=Replay in a fresh sandbox")
        page.wait_for_selector("#replay-report[data-state=succeeded]", timeout=60000)
        assert "reproducible" in page.inner_text("#replay-report")

        page.select_option("#step-1 .label-form select", "good_step")
        page.fill("#step-1 .label-form input[name=comment]", "read before editing")
        page.click("#step-1 .label-form button")
        page.wait_for_selector("#labels-1 .label-good_step")
        page.fill("#review-marks input[name=note]", "check the <b>edit</b>")
        page.click("#review-marks button")
        page.wait_for_selector("#review-marks .review-mark")
        assert "check the <b>edit</b>" in page.inner_text("#review-marks")
        assert page.evaluate("window.__notReloaded") is True  # all of it without leaving the page
        heard = page.evaluate("window.__heard")
        assert {"scoring:running", "scoring:succeeded", "replay:running", "replay:succeeded"} <= set(heard), heard
    finally:
        for _ in worker:
            pass
    trajectory.refresh_from_db()
    assert trajectory.scored_at is not None and trajectory.replay_report["state"] == "succeeded"
    assert problems == []


def test_c_puts_back_what_e_expanded_and_forms_raise_no_console_errors(
    asgi_server: str, page: Any, researcher: Any
) -> None:
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    trajectory = TrajectoryFactory.create()
    for n in (1, 2):
        StepFactory.create(trajectory=trajectory, step=n, observation=f"START-{n} " + "x" * 5000 + f" END-{n}")
    sign_in(page, asgi_server, researcher.username)
    page.goto(f"{asgi_server}/trajectories/{trajectory.trajectory_id}/")
    obs = "#step-2 pre[data-full=observation]"
    head = page.inner_text(obs)
    assert not head.endswith("END-2") and page.is_visible("#step-2 button.more")

    page.keyboard.press("e")
    page.wait_for_function(f"document.querySelector('{obs}').textContent.endsWith('END-2')")
    page.wait_for_function("document.querySelector('#step-1 pre[data-full=observation]').textContent.endsWith('END-1')")
    assert not page.is_visible("#step-2 button.more")
    page.keyboard.press("c")
    assert page.inner_text(obs) == head and page.is_visible("#step-2 button.more")
    page.keyboard.press("e")  # and again: e after c expands once more
    page.wait_for_function(f"document.querySelector('{obs}').textContent.endsWith('END-2')")

    # A refused label (400) still answers in place: the form's error is swapped in, not dropped.
    page.evaluate("document.querySelector('#step-1 .label-form select option').value = 'bogus'")
    page.select_option("#step-1 .label-form select", "bogus")
    page.click("#step-1 .label-form button")
    page.wait_for_selector("#labels-1 .error")
    assert "label must be one of" in page.inner_text("#labels-1 .error")

    # The training-set name field: its pattern is a valid expression (no console error) and works.
    page.goto(f"{asgi_server}/trajectories/")
    field = page.locator("#curate input[name=name]")
    field.fill("demo-wins_2")
    assert field.evaluate("f => f.checkValidity()") is True
    field.fill("no spaces")
    assert field.evaluate("f => f.checkValidity()") is False
    page.goto(f"{asgi_server}/favicon.ico")
    assert page.url.endswith("/static/favicon.svg")
    # Chromium logs every 4xx answer as a console error: the refused label's is expected.
    assert [p for p in problems if "400 (Bad Request)" not in p] == []
