"""The trajectory page filters its steps by tool, errors and flags and searches their text, in the
query for a chunk (with links that keep the filters), and shows each flag at the step that earned it."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.factories import TrajectoryFactory
from trajectories import step_filters
from trajectories.models import Step, Trajectory

pytestmark = pytest.mark.django_db

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def trajectory_with(steps: list[dict[str, Any]], **fields: Any) -> Trajectory:
    trajectory = TrajectoryFactory.create(step_count=len(steps), **fields)
    defaults = {"action_type": "read_file", "action_input": {"path": "src/app.py"}, "observation": "ok"}
    Step.objects.bulk_create([Step(trajectory=trajectory, step=n, **{**defaults, **s}) for n, s in enumerate(steps, 1)])
    return trajectory


def shown(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li class="step" id="step-(\d+)"', html)]


def page(client: Client, trajectory: Trajectory, query: str = "") -> str:
    response = client.get(f"/trajectories/{trajectory.trajectory_id}/?{query}")
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def chunk(client: Client, trajectory: Trajectory, query: str) -> str:
    response = client.get(f"/trajectories/{trajectory.trajectory_id}/steps/?{query}")
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [name for name, _ in attrs]


def test_the_tool_filter_keeps_one_tools_steps_in_the_page_and_in_every_chunk(reviewer_client: Client) -> None:
    tools = ["read_file", "run_command", "run_command", "edit_file"]
    trajectory = trajectory_with(
        [{"action_type": tools[n % 4], "action_input": {"command": f"echo {n}"}} for n in range(1, 61)]
    )
    with CaptureQueriesContext(connection) as queries:
        html = page(reviewer_client, trajectory, "tool=run_command")
    assert len(queries) <= 15
    runs = [n for n in range(1, 61) if tools[n % 4] == "run_command"]
    assert shown(html) == runs[:10]
    assert '<option value="run_command" selected>run_command (30)</option>' in html  # counted from the timeline
    assert f'data-after="{runs[9]}"' in html and f'href="?from={runs[9] + 1}&amp;tool=run_command"' in html
    assert 'data-chunks="/trajectories/' in html and '/steps/?tool=run_command"' in html and 'data-filtered="1"' in html
    rest = chunk(reviewer_client, trajectory, f"tool=run_command&after={runs[9]}")
    assert shown(rest) == runs[10:] and "data-after" not in rest
    earlier = chunk(reviewer_client, trajectory, "tool=edit_file&before=50")
    assert shown(earlier) == [n for n in range(1, 50) if tools[n % 4] == "edit_file"]
    assert shown(chunk(reviewer_client, trajectory, "after=0")) == list(range(1, 51))  # no filter: every step


def test_the_errors_filter_keeps_failed_commands_tool_errors_and_replies_without_a_tool(
    reviewer_client: Client,
) -> None:
    trajectory = trajectory_with(
        [
            {"action_type": "run_command", "exit_code": 0, "observation": "error: printed by a passing command"},
            {"action_type": "run_command", "exit_code": 2, "observation": "No such file"},
            {"action_type": "read_file", "observation": "error: argument 'path' must be a string"},
            {"action_type": "invalid", "action_input": "I think", "observation": "Reply with exactly one tool call"},
            {"action_type": "read_file", "observation": "def f():\n    raise error: not at the start"},
            {"action_type": "run_tests", "exit_code": 1, "observation": "1 failed"},
            {"action_type": "run_command", "exit_code": -9, "observation": "killed"},
        ]
    )
    assert shown(chunk(reviewer_client, trajectory, "errors=1&after=0")) == [2, 3, 4, 6, 7]
    assert shown(chunk(reviewer_client, trajectory, "errors=1&tool=run_command&after=0")) == [2, 7]
    assert shown(chunk(reviewer_client, trajectory, "errors=1&after=4")) == [6, 7]


FLAGS = [
    {"detector": "git_history_mining", "evidence": "looks at repository history: git log -p", "step": 3},
    {"detector": "protected_path_edit", "evidence": f"edits a protected file {HOSTILE}", "path": "tests/test_app.py"},
    {"detector": "eq_override", "evidence": "__eq__ returns True", "path": "src/app.py", "line": 4},
]


def flagged_trajectory() -> Trajectory:
    steps: list[dict[str, Any]] = [{} for _ in range(10)]
    steps[2] = {"action_type": "run_command", "action_input": "git log -p"}
    steps[4] = {"action_type": "write_file", "action_input": {"path": "tests/test_app.py", "content": "x"}}
    steps[6] = {"action_type": "edit_file", "action_input": {"path": "./tests/test_app.py", "old_text": "x"}}
    steps[7] = {"action_type": "write_file", "action_input": {"path": "tests/test_other.py", "content": "y"}}
    steps[8] = {"action_type": "read_file", "action_input": {"path": "tests/test_app.py"}}  # reading is no change
    return trajectory_with(steps, flags=FLAGS)


def test_the_flag_filter_keeps_the_steps_a_flag_names_and_those_that_changed_a_flagged_file(
    reviewer_client: Client,
) -> None:
    trajectory = flagged_trajectory()
    html = page(reviewer_client, trajectory, "flag=any")
    assert shown(html) == [3, 5, 7] and "No step matches" not in html
    assert shown(chunk(reviewer_client, trajectory, "flag=git_history_mining&after=0")) == [3]
    assert shown(chunk(reviewer_client, trajectory, "flag=protected_path_edit&tool=edit_file&after=0")) == [7]
    assert shown(chunk(reviewer_client, trajectory, "flag=any&after=3")) == [5, 7]
    none = chunk(reviewer_client, trajectory, "flag=answer_oracle&after=0")
    assert shown(none) == [] and "No step matches these filters." in none


def test_a_flag_is_explained_at_the_step_that_earned_it(reviewer_client: Client) -> None:
    trajectory = flagged_trajectory()
    html = page(reviewer_client, trajectory)

    def item(n: int) -> str:
        return html.split(f'<li class="step" id="step-{n}">')[1].split('<li class="step"')[0]

    assert "git_history_mining <small>(gaming a check)</small>: looks at repository history: git log -p" in item(3)
    for n in (5, 7):  # both changes of the flagged file, each saying why the flag is there
        assert "protected_path_edit" in item(n)
        assert "tests/test_app.py, shown here because this step changed that file" in item(n)
        assert "edits a protected file &lt;script&gt;" in item(n)
    assert "flag-here" not in item(8) + item(9)
    # src/app.py was changed by no write or edit: its flag stays with the patch's, on the outcome card.
    assert html.count("eq_override") >= 1 and "eq_override" not in "".join(item(n) for n in range(1, 11))
    assert '<a href="?from=3#step-3">#3</a>' in html and '<a href="?from=7#step-7">#7</a>' in html
    tags = Tags()
    tags.feed(item(5))
    assert "script" not in tags.tags and "img" not in tags.tags


def test_a_search_matches_actions_thoughts_and_observations_as_literal_text(reviewer_client: Client) -> None:
    trajectory = trajectory_with(
        [
            {"observation": f"before {HOSTILE} after"},
            {"action_type": "run_command", "action_input": {"command": "grep -E 'a.*b(' src"}},
            {"thought": "the regex axxb( would match here"},
            {"observation": "coverage 100% of lines"},
            {"observation": "coverage 1000 lines"},
            {"thought": "ScRiPt in a thought"},
        ]
    )
    hostile = page(reviewer_client, trajectory, "q=%3CSCRIPT%3E")
    assert shown(hostile) == [1]
    assert 'value="&lt;SCRIPT&gt;"' in hostile and "<SCRIPT>" not in hostile  # the search box, escaped
    tags = Tags()
    tags.feed(hostile.split('<ol class="steps"')[1])
    assert "script" not in tags.tags and "img" not in tags.tags
    assert not [name for name in tags.attrs if name.startswith("on")]
    assert "&amp;q=%3CSCRIPT%3E" in hostile or 'steps/?q=%3CSCRIPT%3E"' in hostile  # links keep the search
    assert shown(chunk(reviewer_client, trajectory, "q=a.*b(&after=0")) == [2]  # not a regex
    assert shown(chunk(reviewer_client, trajectory, "q=100%25&after=0")) == [4]  # nor a LIKE pattern
    assert shown(chunk(reviewer_client, trajectory, "q=script&after=0")) == [1, 6]
    assert shown(chunk(reviewer_client, trajectory, "q=%20%20&after=0")) == list(range(1, 7))  # blank: no search


def test_a_search_reads_a_window_of_steps_a_request_and_searches_on_from_its_edge(
    reviewer_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(step_filters, "SEARCH_WINDOW", 20)
    trajectory = trajectory_with([{"observation": "needle" if n in (25, 58) else "hay"} for n in range(1, 71)])
    first = page(reviewer_client, trajectory, "q=needle")
    assert shown(first) == [] and 'data-after="19"' in first  # nothing in steps 0-19: the page searches on
    assert 'href="?from=20&amp;q=needle"' in first and "No step matches" not in first
    second = chunk(reviewer_client, trajectory, "q=needle&after=19")
    assert shown(second) == [25] and 'data-after="39"' in second
    third = chunk(reviewer_client, trajectory, "q=needle&after=39")
    assert shown(third) == [58] and 'data-after="59"' in third
    last = chunk(reviewer_client, trajectory, "q=needle&after=59")
    assert shown(last) == [] and "data-after" not in last and "No further step matches" in last
    earlier = chunk(reviewer_client, trajectory, "q=needle&before=58")
    assert shown(earlier) == [] and 'data-before="38"' in earlier
    assert shown(chunk(reviewer_client, trajectory, "q=needle&before=38")) == [25]


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("tool=%3Cscript%3Ealert(1)%3C/script%3E", "tool: &lt;script&gt;alert(1)&lt;/script&gt; is not an action type"),
        ("errors=maybe", "errors: maybe is not 1"),
        ("flag=nonsense", "flag: nonsense is not any or a detector"),
        ("q=" + "x" * 201, "q: a search is at most 200 characters (this one has 201)"),
        ("q=a%00b", "q: Null characters are not allowed."),
    ],
)
def test_bad_filter_parameters_are_answered_in_the_page(reviewer_client: Client, query: str, says: str) -> None:
    trajectory = trajectory_with([{} for _ in range(3)])
    response = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/?{query}")
    html = response.content.decode()
    assert response.status_code == 400 and "<h1>Trajectory" in html
    assert "Steps are not filtered: " + says in html and shown(html) == [1, 2, 3]
    assert "<script>alert" not in html
    response = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/steps/?after=1&{query}")
    body = response.content.decode()
    assert response.status_code == 400 and '<ol class="steps"' in body and says in body and shown(body) == []
