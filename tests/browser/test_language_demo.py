"""The Go and JavaScript demo suites in the browser, as `make run` leaves them: a reviewer reads a Go
trajectory's transcript (the system prompt of a Go repository, the search_symbol step), then judges
the JavaScript pair (the human fix against the naive shift) from the keyboard; the verdict is stored
and the queue is done."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from annotation.models import Judgement
from annotation.pairs import PairRequest, draw_pairs
from rewards.services import score_trajectory
from tasks.models import TaskSuite
from tests.factories import PASSWORD
from trajectories.models import Trajectory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
GO_FIX = "5b0e6c1a-2f4d-5a7e-8c31-9d2f4b6a0e11"
JS_FIX, JS_NAIVE = "7d3a9f24-6b1c-5e82-a4d0-3c8e1f5b2a67", "2e8f5c07-9a4b-5d13-b6e2-8f1a7c3d9b54"


def test_a_reviewer_reads_a_go_transcript_and_judges_a_javascript_pair(
    live_server: Any, page: Any, reviewer: Any
) -> None:
    for name in ("demo", "demo-adversarial"):  # the Python suites: other tests load those
        TaskSuite.objects.get_or_create(name=name)
    call_command("seed_demo", stdout=io.StringIO())
    for trajectory_id in (JS_FIX, JS_NAIVE):  # what the rewards worker does after seeding
        score_trajectory(trajectory_id, backend="bwrap")
    assert Trajectory.objects.get(trajectory_id=JS_FIX).success is True
    assert Trajectory.objects.get(trajectory_id=JS_NAIVE).success is False
    draw_pairs(PairRequest(name="js-pairs", suite="demo-js", strategy="random", max_pairs=10, reviewers=1))

    page.goto(f"{live_server.url}/trajectories/{GO_FIX}/transcript/")
    page.fill("input[name=username]", reviewer.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("text=a Go repository (a Go module)")
    assert "func Chunk" in page.content()  # the search_symbol step's observation

    page.goto(f"{live_server.url}/annotation/sets/js-pairs/next/")
    page.wait_for_selector("#pair")
    page.wait_for_selector("#diff-left.highlighted")
    page.wait_for_selector("#diff-right.highlighted")
    left = page.inner_text("#diff-left")
    assert "src/kit.js" in left and "src/kit.js" in page.inner_text("#diff-right")
    fixed_on_left = "(page - 1) * perPage" in left
    page.keyboard.press("1" if fixed_on_left else "2")
    page.keyboard.type("pages count from 1")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector("#queue-done")
    judgement = Judgement.objects.get()
    chosen = judgement.comparison.trajectory_a if judgement.choice == "A" else judgement.comparison.trajectory_b
    assert str(chosen.trajectory_id) == JS_FIX
