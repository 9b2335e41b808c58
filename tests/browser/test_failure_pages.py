"""A rollout that cannot start says why, on its batch's page (live) and on its own page."""

from __future__ import annotations

from typing import Any

import pytest

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.browser.test_live_resync import login
from tests.conftest import DEMO, start_worker
from trajectories.batches import enqueue_missing, start_batch
from trajectories.models import RolloutBatch
from trajectories.rollout_settings import RolloutSettings

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Markup in a path is data: the error that quotes it must show it as text.
MISSING_MODEL = "/nonexistent/<b>h5</b>-model"
WHY = f"the policy could not start: no model directory at {MISSING_MODEL}"


def test_a_failed_trajectorys_error_shows_on_its_batch_page_and_its_own_page(
    asgi_server: str,  # noqa: F811
    page: Any,
    researcher: Any,
) -> None:
    for task_id in ("task_0001", "task_0008"):
        import_task_dirs(DEMO / "tasks" / task_id, "broken")
    batch = start_batch(TaskSuite.objects.get(name="broken"), RolloutSettings("scripted"), enqueue=False)
    # A batch queued before the launch form checked model paths (or whose model was removed since).
    RolloutBatch.objects.filter(pk=batch.pk).update(policy_kind="hf", model=MISSING_MODEL)
    login(page, asgi_server, researcher)
    page.goto(f"{asgi_server}/batches/{batch.pk}/")
    page.wait_for_function("document.getElementById('batch').dataset.synced")
    assert page.locator("#batch-errors").is_hidden()

    worker = start_worker("rollouts")
    next(worker)
    try:
        enqueue_missing(batch)
        page.wait_for_function("document.getElementById('batch-failed').textContent === '2'", timeout=60000)
        page.wait_for_function("document.getElementById('batch-status').textContent === 'failed'", timeout=10000)
        page.wait_for_selector("#batch-errors:not([hidden])", timeout=10000)
    finally:
        for _ in worker:
            pass
    for trajectory in batch.trajectories.all():
        assert trajectory.status == "failed" and trajectory.error.startswith(WHY), trajectory.error
    # Live: the distinct errors once with their count, and each row's own error, all as text.
    errors = page.inner_text("#batch-errors")
    assert "2 ×" in errors and WHY in errors
    assert page.locator("#batch-errors b:has-text('h5')").count() == 0
    cells = page.locator("[data-field=error]").all_inner_texts()
    assert len(cells) == 2 and all(cell.startswith(WHY) for cell in cells), cells

    # Reloaded, the server-rendered page says the same.
    page.reload()
    assert WHY in page.inner_text("#batch-errors") and page.inner_text("#batch-failed") == "2"

    # The trajectory's own page: the error and the log tail where the steps would be.
    first = batch.trajectories.order_by("id").first()
    assert first is not None
    page.goto(f"{asgi_server}/trajectories/{first.trajectory_id}/")
    shown = page.inner_text("#trajectory-error")
    assert WHY in shown and "log tail" in shown and "PolicyError" in shown
    assert page.locator("#trajectory-error b:has-text('h5')").count() == 0
    assert "failed before its first step" in page.inner_text("#no-steps")
    # Leave with no request in flight: a daphne stopped mid-request can hang on its way out.
    page.wait_for_load_state("networkidle")
    page.goto("about:blank")
