"""Every main page under the Content-Security-Policy in a real Chromium: no violation, nothing
fetched from another host (a statement's remote image included), inline script refused."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from tasks.models import Task
from tests.annotation.pairs_data import comparison_set
from tests.factories import PASSWORD, StepFactory
from training.models import RunMetric, TrainingRun
from trajectories.models import RolloutBatch, Trajectory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BEACON = "http://203.0.113.9/beacon.png"  # TEST-NET-3: a request there is the beacon firing
STATEMENT = f"# Fix parse_config\n\n![who opened this task]({BEACON})\n\nIt crashes on empty input."
# Collected before any page script runs (an init script is not subject to the page's CSP).
WATCH_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


def test_the_main_pages_run_under_the_csp_and_fetch_only_from_this_server(
    asgi_server: str, strict_page: Any, admin_user: Any
) -> None:
    page = strict_page
    pairs = comparison_set(name="csp", tasks=1)
    comparison = pairs.comparisons.select_related("task__suite").get()
    task = comparison.task
    assert task is not None
    Task.objects.filter(pk=task.pk).update(statement=STATEMENT)
    trajectory = comparison.trajectory_a
    StepFactory.create(trajectory=trajectory, step=1, observation="<img src=http://203.0.113.9/obs.png>")
    batch = RolloutBatch.objects.create(suite=task.suite, policy_kind="scripted", model="oracle")
    Trajectory.objects.filter(pk=trajectory.pk).update(batch=batch)
    run = TrainingRun.objects.create(kind="grpo", status="succeeded", name="csp-run")
    RunMetric.objects.bulk_create(
        RunMetric(run=run, step=step, values={"reward": 0.1 * step, "kl": 0.01}) for step in range(5)
    )

    requests: list[str] = []
    console: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("websocket", lambda socket: requests.append(socket.url))
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.add_init_script(WATCH_VIOLATIONS)

    response = page.goto(f"{asgi_server}/login/")
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "img-src 'self' data:" in policy and "script-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    page.fill("input[name=username]", admin_user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")

    pages = {
        "dashboard": "/",
        "task": f"/tasks/{task.suite.name}/{task.task_id}/",
        "trajectory": f"/trajectories/{trajectory.trajectory_id}/",
        "batch": f"/batches/{batch.pk}/",
        "compare": f"/annotation/compare/{comparison.pk}/",
        "training run": f"/training/{run.pk}/",
    }
    for name, path in pages.items():
        answer = page.goto(f"{asgi_server}{path}")
        assert answer.status == 200, name
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.__csp") == [], (name, console)
    # The statement's image is a link a reviewer may follow, not a fetch the page makes.
    page.goto(f"{asgi_server}{pages['task']}")
    assert page.get_attribute("a.md-image", "href") == BEACON
    assert page.locator(".markdown img").count() == 0
    # The training run's chart and the dashboard's were drawn (plotly runs under the policy).
    page.goto(f"{asgi_server}/training/{run.pk}/")
    page.wait_for_selector(".js-plotly-plot")

    violations = [line for line in console if "Content Security Policy" in line or "pageerror" in line]
    assert violations == []
    outside = sorted({url for url in requests if urlsplit(url).hostname not in {"127.0.0.1", None}})
    assert outside == []
    assert any(url.startswith("ws://127.0.0.1") for url in requests)  # the live pages' socket is allowed

    # And the policy is enforced, not only sent: an injected inline script does not run.
    page.evaluate(
        "() => { const s = document.createElement('script'); s.textContent = 'window.__ran = 1';"
        " document.body.appendChild(s); }"
    )
    page.wait_for_function("window.__csp.length > 0")
    assert page.evaluate("window.__ran") is None
    assert page.evaluate("window.__csp")[0].startswith("script-src")
    # Off the live page: daphne stops at once when no socket is open (teardown waits otherwise).
    page.goto("about:blank")
