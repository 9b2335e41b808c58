"""The trajectory page renders its first screenful of steps and a tick for every step; the rest
comes a chunk at a time from /trajectories/<id>/steps/, rendered by the same template, so agent
text loaded on demand is escaped exactly as on the page."""

from __future__ import annotations

import re
import uuid
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.conftest import client_for
from tests.factories import StepFactory, TrajectoryFactory
from trajectories.models import Step, Trajectory
from trajectories.queries import STEP_CHUNK, STEP_MORE
from webapp.templatetags.crucible import TIMELINE_TICKS

pytestmark = pytest.mark.django_db

HOSTILE = (
    '</pre></textarea><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    '" onmouseover="window.__pwned = 3" x="'
)


def trajectory_of(steps: int, hostile_at: int | None = None) -> Trajectory:
    trajectory = TrajectoryFactory.create(step_count=steps)
    Step.objects.bulk_create(
        [
            Step(
                trajectory=trajectory,
                step=n,
                action_type="read_file" if n == hostile_at else "run_command",
                action_input={"path": f"{HOSTILE}.py"} if n == hostile_at else {"command": f"echo {n}"},
                observation=HOSTILE if n == hostile_at else f"out {n}",
                thought=HOSTILE if n == hostile_at else "",
            )
            for n in range(1, steps + 1)
        ]
    )
    return trajectory


class Tags(HTMLParser):
    """The elements and attributes a browser would build from some HTML, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.seen: list[tuple[str, list[str]]] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, [name for name, _ in attrs]))

    def handle_data(self, data: str) -> None:
        self.text += data


def step_ids(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li class="step" id="step-(\d+)"', html)]


def step_item(html: str, number: int) -> str:
    """One step's <li>, without the label form's CSRF token (a fresh mask on every response)."""
    item = html.split(f'<li class="step" id="step-{number}">')[1].split("</li>")[0]
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", item)


def test_the_chunks_after_the_first_screenful_hold_every_step_once_in_order(reviewer_client: Client) -> None:
    trajectory = trajectory_of(45)
    html = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    seen = step_ids(html)
    assert seen == list(range(1, STEP_CHUNK + 1))
    after = re.search(r'data-after="(\d+)"', html)
    while after:
        chunk = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/steps/?after={after[1]}")
        assert chunk.status_code == 200 and "<html" not in chunk.content.decode()
        body = chunk.content.decode()
        assert f'data-attempt="{trajectory.attempt}"' in body and 0 < len(step_ids(body)) <= STEP_MORE
        seen += step_ids(body)
        after = re.search(r'data-after="(\d+)"', body)
    assert seen == list(range(1, 46))


def test_earlier_chunks_load_above_a_page_opened_at_a_step(reviewer_client: Client) -> None:
    trajectory = trajectory_of(STEP_MORE + 20)
    page = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/?from={STEP_MORE + 6}").content.decode()
    assert step_ids(page) == list(range(STEP_MORE + 6, STEP_MORE + 6 + STEP_CHUNK))
    assert f'data-before="{STEP_MORE + 6}"' in page and f'data-after="{STEP_MORE + 5 + STEP_CHUNK}"' in page
    chunks = f"/trajectories/{trajectory.trajectory_id}/steps/"
    earlier = reviewer_client.get(f"{chunks}?before={STEP_MORE + 6}").content.decode()
    assert step_ids(earlier) == list(range(6, STEP_MORE + 6)) and 'data-before="6"' in earlier
    assert "data-after" not in earlier
    first = reviewer_client.get(f"{chunks}?before=6").content.decode()
    assert step_ids(first) == list(range(1, 6)) and "data-before" not in first


def test_a_step_loaded_on_demand_is_escaped_exactly_as_a_server_rendered_one(reviewer_client: Client) -> None:
    trajectory = trajectory_of(30, hostile_at=25)
    chunk = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/steps/?after=20").content.decode()
    page = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/?from=25").content.decode()
    assert 25 in step_ids(chunk) and step_ids(page)[0] == 25
    assert step_item(chunk, 25) == step_item(page, 25)
    tags = Tags()
    tags.feed(step_item(chunk, 25))
    assert not {"script", "img", "textarea"} & {tag for tag, _ in tags.seen}
    assert not [name for _, attrs in tags.seen for name in attrs if name.startswith("on")]
    assert tags.text.count(HOSTILE) == 2  # thought and observation, whole, as text (the path is in JSON)


def test_the_chunks_need_a_role(client: Client, outsider: User) -> None:
    trajectory = trajectory_of(25)
    chunks = f"/trajectories/{trajectory.trajectory_id}/steps/"
    assert client.get(f"{chunks}?after=10").status_code == 302  # to the login page
    assert client_for(outsider).get(f"{chunks}?after=10").status_code == 403


def test_a_chunk_reads_bad_and_huge_step_numbers_as_bounds(reviewer_client: Client) -> None:
    trajectory = trajectory_of(60)
    chunks = f"/trajectories/{trajectory.trajectory_id}/steps/"
    first = list(range(1, STEP_MORE + 1))
    assert step_ids(reviewer_client.get(f"{chunks}?after=x").content.decode()) == first
    assert step_ids(reviewer_client.get(f"{chunks}?after=-5").content.decode()) == first
    huge = "99999999999999999999999"
    assert step_ids(reviewer_client.get(f"{chunks}?after={huge}").content.decode()) == []
    assert step_ids(reviewer_client.get(f"{chunks}?before={huge}").content.decode()) == list(range(61 - STEP_MORE, 61))
    assert reviewer_client.get(f"/trajectories/{uuid.uuid4()}/steps/").status_code == 404


def test_a_page_of_thousands_of_steps_renders_one_chunk_and_a_bounded_timeline(reviewer_client: Client) -> None:
    trajectory = trajectory_of(2500)
    StepFactory.create(trajectory=trajectory, step=2501, action_type="invalid", action_input="<b>no tool</b>")
    with CaptureQueriesContext(connection) as queries:
        html = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    assert len(queries) <= 15
    assert step_ids(html) == list(range(1, STEP_CHUNK + 1))
    ticks = re.findall(r'<a class="tick action-([a-z_]+)" href="\?from=(\d+)#step-\2"', html)
    assert len(ticks) <= TIMELINE_TICKS and int(ticks[-1][1]) <= 2501 < int(ticks[-1][1]) + 3
    assert ticks[-1][0] == "invalid"  # a run of steps is drawn as its most telling action
    assert "2501 in all" in html
