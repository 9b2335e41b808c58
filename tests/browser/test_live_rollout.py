"""A researcher launches a batch in the browser and watches its steps arrive live."""

from __future__ import annotations

from typing import Any

import pytest

from tasks.services import import_task_dirs
from tests.conftest import DEMO, start_worker
from trajectories.models import RolloutBatch

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_steps_of_a_running_batch_arrive_live(asgi_server: str, page: Any, researcher: Any) -> None:
    for task_id in ("task_0001", "task_0008", "task_0013"):
        import_task_dirs(DEMO / "tasks" / task_id, "live")
    worker = start_worker("rollouts")
    next(worker)
    try:
        page.goto(f"{asgi_server}/login/")
        page.fill("input[name=username]", researcher.username)
        page.fill("input[name=password]", "correct horse battery")
        page.click("button[type=submit]")
        page.wait_for_selector("h1:has-text('Dashboard')")

        page.goto(f"{asgi_server}/batches/")
        page.select_option("select[name=suite]", "live")
        page.select_option("select[name=policy]", "scripted")
        page.fill("input[name=samples]", "3")
        page.click("#launch button[type=submit]")
        page.wait_for_selector("h1:has-text('Batch #')")
        batch = RolloutBatch.objects.get()
        last = batch.trajectories.order_by("-task_ref", "-sample_index").first()
        assert last is not None

        # Open the last trajectory before it runs; its steps must appear without a reload.
        page.goto(f"{asgi_server}/trajectories/{last.trajectory_id}/")
        page.evaluate("window.__notReloaded = true")
        page.wait_for_function("document.querySelectorAll('li.step').length >= 3", timeout=90000)
        page.wait_for_function("document.getElementById('trajectory-status').textContent === 'finished'", timeout=60000)
        assert page.evaluate("window.__notReloaded") is True
        last.refresh_from_db()
        assert page.locator("li.step").count() == last.step_count
        numbers = page.eval_on_selector_all("li.step", "els => els.map(e => e.id)")
        assert numbers == [f"step-{n}" for n in range(1, last.step_count + 1)]  # none missing, none doubled

        # The batch page follows the batch to its end, live too.
        page.goto(f"{asgi_server}/batches/{batch.pk}/")
        page.evaluate("window.__notReloaded = true")
        page.wait_for_function("document.getElementById('batch-status').textContent === 'succeeded'", timeout=90000)
        assert page.evaluate("window.__notReloaded") is True
        assert page.inner_text("#batch-left") == "0"
    finally:
        for _ in worker:
            pass
