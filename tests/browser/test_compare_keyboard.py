from __future__ import annotations

from typing import Any

import pytest

from annotation.models import Assignment, Judgement
from tests.annotation.pairs_data import comparison_set

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# (key, what the reviewer means on screen, reason typed)
VERDICTS = [("1", "A", "left"), ("b", "B", "right"), ("t", "tie", "same"), ("x", "both_bad", "both"), ("a", "A", "l")]


def test_a_reviewer_judges_five_pairs_with_the_keyboard_and_then_the_queue_is_done(
    live_server: Any, page: Any, reviewer: Any
) -> None:
    comparison_set(name="keys", tasks=6)
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(f"{live_server.url}/annotation/")
    page.fill("input[name=username]", reviewer.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("#sets")
    with page.expect_navigation():
        page.click("tr[data-set=keys] >> text=Start reviewing")
    page.wait_for_selector("#pair")

    skipped_url = page.url
    with page.expect_navigation():
        page.keyboard.press("s")
    assert page.url != skipped_url

    seen = {skipped_url}
    for number, (key, _, reason) in enumerate(VERDICTS):
        page.wait_for_selector("#pair")
        assert page.url not in seen
        seen.add(page.url)
        page.keyboard.press(key)
        assert page.evaluate("document.activeElement.name") == "reason"
        page.keyboard.type(f"{reason} is better")
        if number == 0:
            page.keyboard.press("Shift+Enter")
            page.keyboard.type("second line")
            assert page.url in seen  # Shift+Enter is a new line, not a submit
        with page.expect_navigation():
            page.keyboard.press("Enter")

    # The fifth submit asked for the sixth pair: there is none left for this reviewer.
    page.wait_for_selector("#queue-done")
    assert "The queue is done" in page.inner_text("#queue-done")
    assert dialogs == []

    judgements = list(Judgement.objects.filter(reviewer=reviewer).order_by("created_at", "id"))
    assert len(judgements) == 5
    for judgement, (_, screen, reason) in zip(judgements, VERDICTS, strict=True):
        flipped = {"A": "B", "B": "A"}.get(screen, screen)
        assert judgement.choice == (flipped if judgement.swapped else screen)
        assert judgement.reason.startswith(f"{reason} is better")
    assert judgements[0].reason == "left is better\nsecond line"
    assert Assignment.objects.filter(reviewer=reviewer, skipped_at__isnull=False).count() == 1
