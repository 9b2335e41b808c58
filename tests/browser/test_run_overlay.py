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


def test_find_keeps_only_the_charts_whose_metric_holds_the_text(live_server: Any, page: Any, researcher: Any) -> None:
    run = run_with("one", "1e-5", [2.0, 1.8], {"system_rss_mb": 900.0, "system_cpu_percent": 150.0})
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", researcher.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")
    page.goto(f"{live_server.url}/training/{run.pk}/")
    page.wait_for_function("document.querySelector('.metric-chart[data-metric=loss]').data !== undefined")
    shown = (
        "[...document.querySelectorAll('.metric-cell')].filter((c) => !c.hidden)"
        ".map((c) => c.querySelector('figcaption').textContent)"
    )
    assert sorted(page.evaluate(shown)) == ["loss", "system_cpu_percent", "system_rss_mb"]
    page.fill("#chart-search", "RSS")
    assert page.evaluate(shown) == ["system_rss_mb"]
    assert page.locator("section[data-chart-group='loss']").is_hidden()
    page.fill("#chart-search", "")
    assert len(page.evaluate(shown)) == 3 and page.locator("section[data-chart-group='loss']").is_visible()
