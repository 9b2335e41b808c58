"""The side-by-side diff draws two columns: removed lines on the left, added ones on the right."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import StepFactory, TrajectoryFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PATCH = """diff --git a/src/config.py b/src/config.py
--- a/src/config.py
+++ b/src/config.py
@@ -1,3 +1,4 @@
 def parse_config(text):
-    return dict(line.split("=") for line in text.splitlines())
+    if not text.strip():
+        return {}
+    return dict(line.split("=", 1) for line in text.splitlines())
"""


def test_the_side_by_side_diff_renders_both_columns(live_server: Any, page: Any, reviewer: Any) -> None:
    trajectory = TrajectoryFactory.create(patch=PATCH)
    StepFactory.create(
        trajectory=trajectory,
        step=1,
        action_type="edit_file",
        action_input={"path": "src/config.py", "old_text": "return {}", "new_text": "return {'empty': True}"},
    )
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", reviewer.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")
    page.goto(f"{live_server.url}/trajectories/{trajectory.trajectory_id}/")

    final = page.locator("section.card:has(h2:text('Final patch'))")
    final.locator("summary:text('side by side')").click()
    table = final.locator("table.sbs")
    rows = table.locator("tr")
    # The hunk header, the context line, then the replacement: removed left, added right.
    replaced = rows.nth(2)
    left, right = replaced.locator("td:nth-child(1)"), replaced.locator("td:nth-child(2)")
    assert left.inner_text().strip() == 'return dict(line.split("=") for line in text.splitlines())'
    assert right.inner_text().strip() == "if not text.strip():"
    added_only = [rows.nth(i).locator("td:nth-child(2)").inner_text().strip() for i in (3, 4)]
    assert added_only == ["return {}", 'return dict(line.split("=", 1) for line in text.splitlines())']
    assert [rows.nth(i).locator("td:nth-child(1)").inner_text().strip() for i in (3, 4)] == ["", ""]

    # Drawn as two columns of one row: side by side, each half the table, neither empty.
    lbox, rbox, tbox = left.bounding_box(), right.bounding_box(), table.bounding_box()
    assert abs(lbox["y"] - rbox["y"]) < 1 and rbox["x"] >= lbox["x"] + lbox["width"] - 1
    assert lbox["width"] > tbox["width"] * 0.4 and rbox["width"] > tbox["width"] * 0.4
    added = right.evaluate("td => [getComputedStyle(td).display, getComputedStyle(td).backgroundColor]")
    assert added == ["table-cell", "rgb(230, 255, 236)"]  # a cell, not an inline block; green

    # The same for an edit step's diff.
    step = page.locator("#step-1")
    step.locator("summary:text('side by side')").click()
    edit = step.locator("table.sbs tr").nth(1)
    assert edit.locator("td:nth-child(1)").inner_text().strip() == "return {}"
    assert edit.locator("td:nth-child(2)").inner_text().strip() == "return {'empty': True}"
