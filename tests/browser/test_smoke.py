from __future__ import annotations

import re
from typing import Any

import pytest

from tasks.models import TaskSuite
from trajectories.models import Trajectory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def hostile_patch(lines: list[str]) -> str:
    """A well-formed diff, so the payload reaches both the unified and the side-by-side view."""
    added = "".join(f"+{line}\n" for line in lines)
    removed = "".join(f"-{line}\n" for line in lines)
    n = len(lines)
    return f"diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,{n} +1,{n} @@\n{removed}{added}"


def test_a_reviewer_logs_in_opens_the_demo_suite_and_reads_a_trajectory(
    live_server: Any, page: Any, reviewer: Any, demo_suite: TaskSuite
) -> None:
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url
    page.fill("input[name=username]", "rob-reviewer")
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")

    page.click("nav >> text=Tasks")
    page.click("a:has-text('demo')")
    page.wait_for_selector("h1:has-text('demo')")
    page.click("a:has-text('task_0001')")
    page.wait_for_selector("pre.diff .diff-add")

    trajectory = Trajectory.objects.exclude(task=None).order_by("-step_count").first()
    assert trajectory is not None
    page.goto(f"{live_server.url}/trajectories/")
    page.click(f"a:has-text('{str(trajectory.trajectory_id)[:8]}')")
    page.wait_for_selector("ol.steps")
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")  # the rest loads when near
    page.wait_for_function("n => document.querySelectorAll('li.step').length === n", arg=trajectory.step_count)
    first = trajectory.steps.order_by("step").first()
    assert first is not None
    assert first.action_type in page.locator("li.step").first.inner_text()

    # Hostile strings from the demo data must stay text on every trajectory page.
    for t in Trajectory.objects.all():
        page.goto(f"{live_server.url}/trajectories/{t.trajectory_id}/")
    assert dialogs == []


def test_a_reviewer_moves_through_steps_and_trajectories_from_the_keyboard(
    live_server: Any, page: Any, reviewer: Any
) -> None:
    from tests.trajectories.test_review_page import long_trajectory

    older = long_trajectory(steps=3, observation=10)
    trajectory = long_trajectory(steps=60, observation=3000)
    Trajectory.objects.filter(pk=older.pk).update(created_at=trajectory.created_at.replace(year=2020))
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "rob-reviewer")
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")
    page.goto(f"{live_server.url}/trajectories/{trajectory.trajectory_id}/")
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.get_attribute("li.step.current", "id") == "step-2"
    page.keyboard.press("k")
    assert page.get_attribute("li.step.current", "id") == "step-1"
    # G goes to the last step: not loaded yet (only the first screenful is), so the page opens there.
    page.keyboard.press("G")
    page.wait_for_url(re.compile(r"\?from=60#step-60$"))
    assert page.get_attribute("li.step.current", "id") == "step-60"
    page.click("#step-60 button.more")
    page.wait_for_function(
        "document.querySelector('#step-60 pre[data-full=observation]').textContent.endsWith('END-60')"
    )
    # Label the first step from the keyboard: g, l, then type into the form (htmx swaps it in).
    page.keyboard.press("g")
    page.wait_for_url(re.compile(r"\?from=1#step-1$"))
    page.keyboard.press("l")
    assert page.evaluate("document.activeElement.closest('li.step').id") == "step-1"
    page.select_option("#step-1 .label-form select", "mistake")
    page.fill("#step-1 .label-form input[name=comment]", "ran the wrong test file")
    page.click("#step-1 .label-form button")
    page.wait_for_selector("#labels-1 .label-mistake")
    assert "ran the wrong test file" in page.inner_text("#labels-1")
    page.click("body")  # keys go to the page again, not the form
    page.keyboard.press("n")
    page.wait_for_url(f"**/trajectories/{older.trajectory_id}/")
    page.keyboard.press("p")
    page.wait_for_url(f"**/trajectories/{trajectory.trajectory_id}/")


PAYLOADS = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'onerror'\">",
    '<a href="javascript:window.__pwned=\'link\'" id="evil-link">click</a>',
    "</pre></div></li></ol><svg onload=\"window.__pwned='svg'\"><div <b>unbalanced",
]


def test_hostile_agent_output_and_statements_stay_inert(live_server: Any, page: Any, reviewer: Any) -> None:
    from tests.factories import StepFactory, TaskFactory, TrajectoryFactory

    hostile = "\n".join(PAYLOADS)
    task = TaskFactory.create(statement=f"# Bug\n\n{hostile}\n\n[docs](javascript:window.__pwned='md')")
    trajectory = TrajectoryFactory.create(
        task=task,
        task_ref=task.task_id,
        prompt=hostile,
        patch=hostile_patch(PAYLOADS),
        flags=[{"detector": "eq_override", "evidence": hostile}],
    )
    StepFactory.create(
        trajectory=trajectory,
        step=1,
        action_type="run_command",
        action_input={"command": hostile},
        thought=hostile,
        observation=hostile * 300,
    )
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "rob-reviewer")
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")
    for url in (
        f"/tasks/{task.suite.name}/{task.task_id}/",
        f"/trajectories/{trajectory.trajectory_id}/",
        "/trajectories/",
        "/",
    ):
        page.goto(f"{live_server.url}{url}")
        page.wait_for_load_state("load")
        if page.locator("button.more").count():
            page.click("button.more")  # the full observation, loaded on demand, stays text too
            page.wait_for_timeout(300)
        assert page.evaluate("window.__pwned === undefined"), url
        assert page.locator("#evil-link").count() == 0, url
        assert page.locator("svg[onload]").count() == 0, url
    page.goto(f"{live_server.url}/trajectories/{trajectory.trajectory_id}/")
    assert "<script>window.__pwned = 'script'</script>" in page.inner_text("li.step .thought")  # shown, as text
