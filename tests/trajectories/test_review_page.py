"""The trajectory page stays fast on long trajectories and is driven from the keyboard."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.factories import StepFactory, TrajectoryFactory
from trajectories.models import Step, Trajectory
from trajectories.queries import STEP_CHUNK

pytestmark = pytest.mark.django_db


def long_trajectory(steps: int = 120, observation: int = 5000) -> Trajectory:
    trajectory = TrajectoryFactory.create(step_count=steps)
    Step.objects.bulk_create(
        [
            Step(
                trajectory=trajectory,
                step=n,
                action_type="run_command",
                action_input={"command": f"echo {n}"},
                observation=f"<b>out {n}</b>" + "x" * observation + f"END-{n}",
                thought=f"thinking {n}",
            )
            for n in range(1, steps + 1)
        ]
    )
    return trajectory


def test_a_long_trajectory_shows_a_first_chunk_of_short_heads_and_a_tick_for_every_step(
    reviewer_client: Client,
) -> None:
    trajectory = long_trajectory()
    with CaptureQueriesContext(connection) as queries:
        html = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    assert 3 <= len(queries) <= 15, [q["sql"][:80] for q in queries]
    assert html.count('class="step"') == STEP_CHUNK and html.count('class="tick action-run_command"') == 120
    assert f'data-after="{STEP_CHUNK}"' in html and "data-before" not in html  # the rest loads on demand
    assert 'href="?from=120#step-120"' in html  # a tick opens the page at its step
    assert "END-1<" not in html and "Show all 5017 characters" in html  # 12 + 5000 + 5
    assert "&lt;b&gt;out 1&lt;/b&gt;" in html  # heads are escaped like everything else
    last = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/?from=115").content.decode()
    assert last.count('class="step"') == 6 and 'id="step-115"' in last and 'id="step-120"' in last
    assert 'data-before="115"' in last and "data-after" not in last
    beyond = reviewer_client.get(
        f"/trajectories/{trajectory.trajectory_id}/?from=99999999999999999999"
    ).content.decode()
    assert beyond.count('class="step"') == 1 and 'id="step-120"' in beyond  # past the end: the last step
    assert reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/?from=x").status_code == 200


def test_one_steps_full_text_comes_from_the_api(reviewer_client: Client) -> None:
    trajectory = long_trajectory(steps=3)
    body = reviewer_client.get(f"/api/v1/trajectories/{trajectory.trajectory_id}/steps/?after=1&limit=1").json()
    assert [s["step"] for s in body["steps"]] == [2] and body["steps"][0]["observation"].endswith("END-2")
    assert reviewer_client.get(f"/api/v1/trajectories/{trajectory.trajectory_id}/steps/?after=x").status_code == 400


def test_neighbouring_trajectories_are_linked_for_n_and_p(reviewer_client: Client) -> None:
    older, middle, newer = (TrajectoryFactory.create() for _ in range(3))
    for t, minutes in ((older, 1), (middle, 2), (newer, 3)):
        Trajectory.objects.filter(pk=t.pk).update(created_at=t.created_at.replace(minute=minutes))
    StepFactory.create(trajectory=middle)
    html = reviewer_client.get(f"/trajectories/{middle.trajectory_id}/").content.decode()
    assert f'data-previous="/trajectories/{newer.trajectory_id}/"' in html
    assert f'data-next="/trajectories/{older.trajectory_id}/"' in html


def test_the_page_shows_per_test_results_step_rewards_and_flags_at_their_step(
    reviewer_client: Client, demo_suite: object
) -> None:
    from rewards.services import score_trajectory

    trajectory = Trajectory.objects.filter(task__task_id="task_0009", claimed__success=False).first()
    assert trajectory is not None
    reward = score_trajectory(str(trajectory.trajectory_id))
    flagged = next(f for f in reward.flags if f["detector"] == "repeated_final_test_runs")
    html = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    assert 'id="test-results"' in html and reward.spec_version in html
    first_test = next(iter(reward.breakdown["tests"]))
    assert first_test in html
    # The flagged step is past the first screenful: the chunk that loads it shows the flag there.
    chunk = reviewer_client.get(
        f"/trajectories/{trajectory.trajectory_id}/steps/?after={flagged['step'] - 1}"
    ).content.decode()
    step_html = chunk.split(f'id="step-{flagged["step"]}"')[1].split('class="step"')[0]
    assert "repeated_final_test_runs" in step_html
    assert "repeated_command -0.1" in html  # a step's reward breakdown


def test_edits_show_as_diffs_both_ways_and_files_are_highlighted(reviewer_client: Client) -> None:
    trajectory = TrajectoryFactory.create(
        patch="diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    )
    StepFactory.create(
        trajectory=trajectory,
        step=1,
        action_type="read_file",
        action_input={"path": "a.py"},
        observation="def f():\n    return '<b>'\n",
    )
    StepFactory.create(
        trajectory=trajectory,
        step=2,
        action_type="edit_file",
        action_input={"path": "a.py", "old_text": "x = 1\n", "new_text": "x = 2  # <script>\n"},
    )
    html = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    assert '<span class="diff-add">+x = 2  # &lt;script&gt;</span>' in html
    assert '<span class="diff-del">-x = 1</span>' in html
    assert html.count('<table class="sbs">') == 2  # the edit and the final patch
    assert '<td class="diff-del"><pre>x = 1</pre></td><td class="diff-add"><pre>x = 2</pre></td>' in html
    assert '<span class="k">def</span>' in html and "'&lt;b&gt;'" in html  # highlighted, still escaped
