"""A researcher reads a set's agreement trend in a real browser and settles a disagreement."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from annotation.models import Comparison
from tests.annotation.agreement_fixtures import Pair, day, make_set

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = "<img src=x onerror=alert('reason')><script>alert('reason')</script>"


def test_the_trend_draws_and_a_disagreement_is_resolved_with_hostile_reasons_kept_as_text(
    live_server: Any, page: Any, researcher: User
) -> None:
    cset = make_set(
        "browser",
        [
            Pair({"ann": "A", "ben": "A"}, when=day(2)),
            Pair({"ann": "A", "ben": "B"}, reasons={"ann": HOSTILE}, when=day(3)),
        ],
    )
    problems: list[str] = []

    def on_dialog(dialog: Any) -> None:
        problems.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))

    page.goto(f"{live_server.url}/annotation/sets/{cset.name}/agreement/")
    page.fill("input[name=username]", researcher.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("#agreement-trend .main-svg")  # Plotly drew the chart
    assert page.locator("#agreement-trend .scatterlayer .trace").count() == 2  # reviewers, verified reward
    # The time axis reads as days, and the legend sits clear of the plot and of the dates.
    layout = "document.getElementById('agreement-trend')._fullLayout"
    assert page.evaluate(f"{layout}.xaxis.type") == "date"
    assert page.evaluate(f"{layout}.xaxis._vals.map((tick) => tick.text)") == ["2 Mar 2026", "3 Mar 2026"]
    legend = page.locator("#agreement-trend .legend").bounding_box()
    plot = page.locator("#agreement-trend .nsewdrag").bounding_box()
    dates = page.locator("#agreement-trend .xtick text").last.bounding_box()
    assert legend["y"] >= max(plot["y"] + plot["height"], dates["y"] + dates["height"])

    page.click("text=1 disagreement")
    disputed = Comparison.objects.get(comparison_set=cset, position=1)
    page.click(f"a:has-text('#{disputed.pk}')")
    assert HOSTILE in page.locator("#discussion").inner_text()
    page.check("input[name=choice][value=B]")
    page.fill("textarea[name=note]", "B keeps the public API.")
    page.click("#resolve-form button[type=submit]")
    page.wait_for_selector("text=resolved: B")
    disputed.refresh_from_db()
    assert disputed.resolution == "B"
    assert problems == []
