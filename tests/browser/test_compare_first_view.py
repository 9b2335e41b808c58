"""At 1280x800 the review screen shows both patches at once, above the verdict bar, and is judged
from the keyboard; a second pair of the same task keeps the statement folded away."""

from __future__ import annotations

from typing import Any

import pytest

from annotation.models import Judgement
from tests.annotation.pairs_data import comparison_set, diff, scored
from tests.factories import SuiteFactory, TaskFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH, HEIGHT = 1280, 800
# A statement as long as a real issue's: on its first read it must not push the patches away.
STATEMENT = "\n\n".join(
    f"Paragraph {i}: the parser drops the last line when the file has no newline." for i in range(40)
)


def visible_height(page: Any, selector: str, bar: dict[str, float]) -> float:
    """How much of the element is inside the viewport and above the verdict bar, in pixels."""
    box = page.locator(selector).bounding_box()
    return min(box["y"] + box["height"], bar["y"], HEIGHT) - max(box["y"], 0)


def assert_both_patches_in_view(page: Any) -> None:
    # Each side first shows the plain diff, which htmx then swaps (outerHTML) for the highlighted one:
    # measured mid-swap, the element is gone and has no box. The highlighted one is what stays.
    for side in ("left", "right"):
        page.wait_for_selector(f"#diff-{side}.highlighted")
    bar = page.locator("#judgement").bounding_box()
    assert bar["height"] < HEIGHT / 4, f"the verdict bar takes {bar['height']} px"
    assert bar["y"] + bar["height"] <= HEIGHT + 1  # at the foot of the viewport
    for side in ("left", "right"):
        whole = page.locator(f"#diff-{side}").bounding_box()["height"]  # a short patch shows whole
        shown = visible_height(page, f"#diff-{side}", bar)
        assert shown >= min(150, whole - 1), f"the {side} patch is not in the first view ({shown} of {whole} px)"


def test_both_patches_are_in_the_first_view_and_a_keyboard_verdict_can_be_undone(
    live_server: Any, page: Any, reviewer: Any
) -> None:
    suite = SuiteFactory.create(name="view-suite")
    task = TaskFactory.create(suite=suite, task_id="view-task", statement=STATEMENT)
    for i in range(3):
        scored(task, diff("\n".join(f"    line_{n} = {i}" for n in range(40))))
    comparison_set(name="view", suite=suite)  # three pairs of one task
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", reviewer.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")
    page.goto(f"{live_server.url}/annotation/sets/view/next/")

    # First read of the task: the statement is open, and the patches are still in view.
    assert page.locator("#statement").get_attribute("open") is not None
    assert page.inner_text("#queue-position") == "pair 1 of 3 in this set"
    assert_both_patches_in_view(page)
    first = page.url
    page.keyboard.press("2")
    page.keyboard.type("right handles the empty file")
    with page.expect_navigation():
        page.keyboard.press("Enter")

    # The same task again: its statement is folded, the bar stays small while scrolling.
    page.wait_for_selector("#pair")
    assert page.url != first
    assert page.locator("#statement").get_attribute("open") is None
    assert page.inner_text("#queue-position") == "pair 2 of 3 in this set"
    assert_both_patches_in_view(page)
    page.mouse.wheel(0, 600)
    page.wait_for_function("window.scrollY > 0")
    assert page.locator("#judgement").bounding_box()["height"] < HEIGHT / 4

    # u takes the verdict back: the first pair again, the verdict and reason filled in as they were.
    with page.expect_navigation():
        page.keyboard.press("u")
    assert page.url == first
    assert not Judgement.objects.exists()
    assert page.inner_text("#queue-position") == "pair 1 of 3 in this set"
    assert page.locator("input[name=choice][value=B]").is_checked()
    assert page.evaluate("document.activeElement.name") == "reason"
    page.keyboard.press("Control+a")
    page.keyboard.type("tie after all")
    page.keyboard.press("Escape")
    page.keyboard.press("t")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector("#pair")
    judgement = Judgement.objects.get()
    assert (judgement.choice, judgement.reason) == ("tie", "tie after all")
