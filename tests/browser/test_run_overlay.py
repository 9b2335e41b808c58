"""Two runs ticked on the training page open overlaid: a chart per metric, a curve per run."""

from __future__ import annotations

from typing import Any

import pytest

from tests.training.test_run_overlay import run_with

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_ticked_runs_open_overlaid_with_a_curve_each(live_server: Any, page: Any, researcher: Any) -> None:
    a = run_with("low lr", "1e-5", [2.0, 1.8, 1.7])
    b = run_with("high lr", "1e-4", [2.0, 1.2])
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", researcher.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")
    page.goto(f"{live_server.url}/training/")
    page.check(f"#overlay-form input[value='{a.pk}']")
    page.check(f"#overlay-form input[value='{b.pk}']")
    page.click("#overlay-form button[type=submit]")
    page.wait_for_selector(".overlay-chart[data-metric='loss'][data-ready='1']")
    assert page.locator(".overlay-chart[data-metric='loss'] .scatterlayer .trace").count() == 2
    assert page.locator("#config-diff td code", has_text="rl.learning_rate").count() == 1
