from __future__ import annotations

from typing import Any

import pytest

from tasks.models import TaskSuite
from trajectories.models import Trajectory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


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
    assert page.locator("li.step").count() == trajectory.step_count
    first = trajectory.steps.order_by("step").first()
    assert first is not None
    assert first.action_type in page.locator("li.step").first.inner_text()

    # Hostile strings from the demo data must stay text on every trajectory page.
    for t in Trajectory.objects.all():
        page.goto(f"{live_server.url}/trajectories/{t.trajectory_id}/")
    assert dialogs == []
