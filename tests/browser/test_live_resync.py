"""A batch page left open through an idle spell and a dropped WebSocket ends showing the truth."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, start_worker
from trajectories.batches import enqueue_missing, start_batch
from trajectories.models import RolloutBatch, Trajectory
from trajectories.rollout_settings import RolloutSettings
from webapp.celery import app

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TASKS = ("task_0001", "task_0008", "task_0013")
SAMPLES = 3
# Longer than redis-py's default 5 s socket timeout, which used to drop idle pages.
IDLE_S = 6

# Every WebSocket the page opens is kept in window.__sockets; while window.__blockWs is set, new
# ones go to a port where nothing listens: the server is unreachable, as on a dropped network.
SOCKETS = """
(() => {
  const Native = window.WebSocket;
  window.__sockets = [];
  window.__blockWs = false;
  function Wrapped(url, protocols) {
    const ws = new Native(window.__blockWs ? "ws://127.0.0.1:9/" : url, protocols);
    window.__sockets.push(ws);
    return ws;
  }
  Wrapped.prototype = Native.prototype;
  Object.assign(Wrapped, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
  window.WebSocket = Wrapped;
})();
"""
ROWS = """() => Object.fromEntries(Array.from(document.querySelectorAll("tr[data-trajectory]")).map(
  (tr) => [tr.dataset.trajectory, tr.querySelector('[data-field="status"]').textContent.trim()]))"""


def db_rows(batch: RolloutBatch) -> dict[str, str]:
    return {str(t): s for t, s in batch.trajectories.values_list("trajectory_id", "status")}


def login(page: Any, base: str, user: Any) -> None:
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")


def test_a_batch_page_resyncs_after_an_idle_spell_and_a_dropped_socket(
    asgi_server: str,  # noqa: F811
    page: Any,
    researcher: Any,
) -> None:
    for task_id in TASKS:
        import_task_dirs(DEMO / "tasks" / task_id, "resync")
    batch = start_batch(
        TaskSuite.objects.get(name="resync"), RolloutSettings("scripted", samples=SAMPLES), enqueue=False
    )
    total = len(TASKS) * SAMPLES
    page.add_init_script(SOCKETS)
    login(page, asgi_server, researcher)
    page.goto(f"{asgi_server}/batches/{batch.pk}/")
    page.evaluate("window.__notReloaded = true")
    page.wait_for_function("document.getElementById('batch').dataset.synced")  # subscribed, synced once
    # A second tab on the batch's last trajectory, open before it runs: header and provenance follow.
    last = batch.trajectories.order_by("-task_ref", "-sample_index").first()
    assert last is not None
    tab = page.context.new_page()
    tab.goto(f"{asgi_server}/trajectories/{last.trajectory_id}/")
    assert tab.inner_text("#trajectory-steps") == "0" and tab.inner_text("#provenance-policy") == "–"
    time.sleep(IDLE_S)  # nothing happens: the pages sit idle on open sockets

    worker = start_worker("rollouts")
    next(worker)
    try:
        enqueue_missing(batch)
        # The idle page hears the first trajectories end, live.
        page.wait_for_function(
            "Object.values((" + ROWS + ")()).filter((s) => s === 'finished').length >= 2", timeout=60000
        )
        assert page.evaluate("window.__sockets.length") == 1  # live, not a reconnect

        # The socket drops and cannot come back while the rest of the batch runs.
        page.evaluate("window.__blockWs = true; window.__sockets.forEach((s) => s.close())")
        deadline = time.monotonic() + 90
        while True:
            batch.refresh_from_db()
            if batch.status in ("succeeded", "failed"):
                break
            assert time.monotonic() < deadline, "the batch did not finish"
            time.sleep(0.2)
        assert batch.status == "succeeded"
        shown = page.evaluate(f"({ROWS})()")
        assert shown != db_rows(batch), "the page saw the end without its socket: the test proves nothing"
        assert page.inner_text("#batch-status") != "succeeded"

        # Back online: the page reconnects and repaints from the server, without a reload.
        page.evaluate("window.__blockWs = false; window.dispatchEvent(new Event('online'))")
        page.wait_for_function("document.getElementById('batch-status').textContent === 'succeeded'", timeout=20000)
        assert page.evaluate(f"({ROWS})()") == db_rows(batch)
        assert page.inner_text("#batch-finished") == str(total) and page.inner_text("#batch-left") == "0"
        last.refresh_from_db()
        tab.wait_for_function("document.getElementById('trajectory-status').textContent === 'finished'")
        tab.wait_for_function("document.getElementById('provenance-policy').textContent === 'scripted'")
        assert tab.inner_text("#trajectory-steps") == str(last.step_count) and last.step_count >= 3
        assert tab.inner_text("#provenance-model") == "oracle"
        assert tab.inner_text("#trajectory-termination") == "submitted"
        assert page.evaluate("window.__notReloaded") is True

        # Back to the tab after something changed unannounced: the page checks again.
        changed = Trajectory.objects.filter(batch=batch).order_by("id").first()
        assert changed is not None
        Trajectory.objects.filter(pk=changed.pk).update(status="failed", error="disk full on the worker\ntrace")
        page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
        row = f"tr[data-trajectory='{changed.trajectory_id}']"
        page.wait_for_function(
            f"document.querySelector(\"{row} [data-field=status]\").textContent === 'failed'", timeout=10000
        )
        assert page.inner_text(f"{row} [data-field=error]") == "disk full on the worker"
        assert page.evaluate(f"({ROWS})()") == db_rows(batch)
        # Leave with no request in flight: a daphne stopped mid-request can hang on its way out.
        for each in (tab, page):
            each.wait_for_load_state("networkidle")
            each.goto("about:blank")
    finally:
        for _ in worker:
            pass
        # The scoring jobs these rollouts queued are nobody's here (no rewards worker); left in the
        # tests' Redis, a later test's rewards worker would have to run them all first.
        app.control.purge()
