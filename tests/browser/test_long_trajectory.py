"""A long trajectory in a real browser: the page opens on its first screenful, scrolling brings
the rest a chunk at a time (agent text in them stays text), the timeline reaches every step, and
a running trajectory goes on live once the reader has scrolled to its end."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from core.live import publish
from tests.factories import TrajectoryFactory
from trajectories.events import trajectory_live_group
from trajectories.models import Step, Trajectory
from trajectories.queries import STEP_CHUNK, STEP_MORE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STEPS = 2000
HOSTILE_AT = 1500
HOSTILE = (
    '</pre></textarea><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    '" onmouseover="window.__pwned = 3" x="'
)
SHOWN = "els => els.map((li) => Number(li.id.slice(5)))"


def steps_of(trajectory: Trajectory, numbers: range) -> None:
    Step.objects.bulk_create(
        [
            Step(
                trajectory=trajectory,
                step=n,
                action_type="run_command",
                action_input={"command": f"echo {n}"},
                observation=HOSTILE if n == HOSTILE_AT else f"out {n}",
            )
            for n in numbers
        ]
    )


def sign_in(page: Any, base: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", "rob-reviewer")
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")


def scroll_until(page: Any, number: int) -> None:
    """Scroll to the bottom until step `number` is shown, each time waiting for the chunk it brings.

    Not the End key: Chromium animates that scroll towards the bottom as it was when the key
    was pressed, so a chunk arriving meanwhile can leave the page short of the new bottom."""
    deadline = time.monotonic() + 120
    while not page.locator(f"#step-{number}").count():
        assert time.monotonic() < deadline, f"step {number} never loaded"
        after = int(page.get_attribute("li.steps-more[data-after]", "data-after"))
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        page.wait_for_function("n => document.getElementById(`step-${n}`)", arg=after + 1, polling=50)


def test_a_reviewer_scrolls_a_2000_step_trajectory_to_its_end(live_server: Any, page: Any, reviewer: Any) -> None:
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    trajectory = TrajectoryFactory.create(step_count=STEPS)
    steps_of(trajectory, range(1, STEPS + 1))
    sign_in(page, live_server.url)
    url = f"{live_server.url}/trajectories/{trajectory.trajectory_id}/"
    page.goto(url)
    assert page.locator("li.step").count() == STEP_CHUNK

    scroll_until(page, STEPS)
    assert page.eval_on_selector_all("li.step", SHOWN) == list(range(1, STEPS + 1))  # each once, in order
    assert page.text_content(f"#step-{STEPS} pre[data-full=observation]") == f"out {STEPS}"
    assert page.locator("li.steps-more").count() == 0
    # A step loaded on demand shows the agent's text as text: nothing of it ran or became markup.
    assert page.text_content(f"#step-{HOSTILE_AT} pre[data-full=observation]") == HOSTILE
    assert page.locator(f"#step-{HOSTILE_AT} :is(script, img, textarea)").count() == 0
    page.hover(f"#step-{HOSTILE_AT} pre[data-full=observation]")
    assert page.evaluate("window.__pwned") is None and dialogs == []

    # Opened at a step near the end: earlier steps load above on request, a tick of a step shown
    # scrolls to it, and one of a step not shown opens the page from there.
    page.goto(f"{url}?from=1995#step-1995")
    assert page.eval_on_selector_all("li.step", SHOWN) == list(range(1995, STEPS + 1))
    page.click("li.steps-more[data-before] a")
    page.wait_for_selector(f"#step-{1995 - STEP_MORE}")
    assert page.eval_on_selector_all("li.step", SHOWN) == list(range(1995 - STEP_MORE, STEPS + 1))
    page.click('.timeline a.tick[href="?from=1989#step-1989"]')  # one tick per two steps at 2,000
    assert page.get_attribute("li.step.current", "id") == "step-1989" and "from=1995" in page.url
    page.click('.timeline a.tick[href="?from=1#step-1"]')
    page.wait_for_url(re.compile(r"\?from=1#step-1$"))
    assert page.get_attribute("li.step.current", "id") == "step-1"


def test_a_running_trajectory_goes_on_live_once_scrolled_to_its_end(asgi_server: str, page: Any, reviewer: Any) -> None:
    trajectory = TrajectoryFactory.create(status=Trajectory.Status.RUNNING, step_count=15)
    steps_of(trajectory, range(1, 16))
    group = trajectory_live_group(trajectory.trajectory_id)

    def record(n: int) -> None:  # as the rollout's recorder does: the step, its count, then the event
        steps_of(trajectory, range(n, n + 1))
        Trajectory.objects.filter(pk=trajectory.pk).update(step_count=n)
        live = {
            "step": n,
            "action_type": "run_command",
            "action_input": {"command": f"echo {n}"},
            "observation": f"out {n}",
            "thought": "",
            "exit_code": 0,
            "duration_ms": 1.0,
            "timestamp": None,
        }
        # In a thread of its own: publishing goes through async_to_sync, which cannot run in this
        # thread while Playwright's event loop does.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(publish, group, {"kind": "steps", "attempt": trajectory.attempt, "steps": [live]}).result()

    sign_in(page, asgi_server)
    page.goto(f"{asgi_server}/trajectories/{trajectory.trajectory_id}/")
    # Listen beside the page's own handler, which runs first: once this one heard an event, the
    # page has handled it.
    page.evaluate(
        """group => { window.__heard = [];
        CrucibleLive.subscribe(group, (e) => window.__heard.push(e.kind)); }""",
        group,
    )
    page.wait_for_function("window.__heard.includes('subscribed')")
    page.wait_for_load_state("networkidle")  # the page's catch-up after subscribing has answered
    record(16)
    page.wait_for_function("window.__heard.includes('steps')")
    # Steps 11 to 15 are not loaded yet: a live step 16 would leave a gap, so it waits its turn.
    assert page.eval_on_selector_all("li.step", SHOWN) == list(range(1, STEP_CHUNK + 1))
    assert page.inner_text("#trajectory-steps") == "16"

    scroll_until(page, 16)
    assert page.eval_on_selector_all("li.step", SHOWN) == list(range(1, 17))
    record(17)
    page.wait_for_selector("#step-17")  # at the end, live steps are added as they come
    assert page.eval_on_selector_all("li.step", SHOWN) == list(range(1, 18))
