from __future__ import annotations

import pytest
from django.test import Client

from tasks.models import Task, TaskSuite
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)"><a href="javascript:alert(3)">x</a></div>'


def test_the_dashboard_counts_what_is_stored(reviewer_client: Client, demo_suite: TaskSuite) -> None:
    html = reviewer_client.get("/").content.decode()
    assert f"<b>{Task.objects.count()}</b> tasks" in html
    assert f"<b>{Trajectory.objects.count()}</b> trajectories" in html
    assert f"<b>{Trajectory.objects.filter(success=True).count()}</b> succeeded" in html


def test_the_suite_page_lists_its_tasks(reviewer_client: Client, demo_suite: TaskSuite) -> None:
    html = reviewer_client.get("/tasks/demo/").content.decode()
    for task in demo_suite.tasks.all():
        assert f'href="/tasks/demo/{task.task_id}/"' in html


def test_the_task_page_shows_statement_tree_patch_and_metadata(reviewer_client: Client, demo_suite: TaskSuite) -> None:
    task = Task.objects.get(task_id="task_0001")
    html = reviewer_client.get("/tasks/demo/task_0001/").content.decode()
    assert "<h" in html and "parse_config" in html
    for path, _size in task.snapshot_files:
        assert str(path).split("/")[-1] in html
    assert 'class="diff-add"' in html and 'class="diff-del"' in html
    assert task.fail_to_pass[0] in html and task.version in html


def test_a_snapshot_file_is_shown_highlighted_and_unknown_paths_are_404(
    reviewer_client: Client, demo_suite: TaskSuite
) -> None:
    task = Task.objects.get(task_id="task_0001")
    py = next(str(p) for p, _ in task.snapshot_files if str(p).endswith(".py"))
    assert 'class="code"' in reviewer_client.get(f"/tasks/demo/task_0001/files/{py}").content.decode()
    assert reviewer_client.get("/tasks/demo/task_0001/files/../../secret_key").status_code == 404
    assert reviewer_client.get("/tasks/demo/task_0001/files/nope.py").status_code == 404


def test_statements_render_markdown_but_never_raw_html(reviewer_client: Client) -> None:
    task = TaskFactory.create(statement=f"# Crash\n\nSee `parse_config`.\n\n{HOSTILE}\n\n[click](javascript:alert(4))")
    html = reviewer_client.get(f"/tasks/{task.suite.name}/{task.task_id}/").content.decode()
    assert "<h1>Crash</h1>" in html and "<code>parse_config</code>" in html
    assert "<script>alert" not in html and "<img" not in html and 'href="javascript:' not in html


def test_trajectory_text_is_escaped_everywhere(reviewer_client: Client) -> None:
    trajectory = TrajectoryFactory.create(prompt=HOSTILE, patch=f"+{HOSTILE}\n", task_ref=HOSTILE[:40])
    StepFactory.create(trajectory=trajectory, thought=HOSTILE, observation=HOSTILE, action_input={"cmd": HOSTILE})
    for url in (f"/trajectories/{trajectory.trajectory_id}/", "/trajectories/", "/"):
        html = reviewer_client.get(url).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html, url
    assert (
        "&lt;script&gt;alert(1)&lt;/script&gt;"
        in reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    )


def test_the_trajectory_page_shows_every_step_in_order(reviewer_client: Client) -> None:
    trajectory = TrajectoryFactory.create()
    for n in (2, 3, 1):
        StepFactory.create(
            trajectory=trajectory,
            step=n,
            thought=f"thought number {n}",
            observation=f"observed {n}",
            action_type="run_command",
            action_input={"command": "ls"},
        )
    html = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    positions = [html.index(f"thought number {n}") for n in (1, 2, 3)]
    assert positions == sorted(positions)
    assert "observed 3" in html


def test_the_trajectory_list_filters_and_pages(reviewer_client: Client) -> None:
    wins = [TrajectoryFactory.create(success=True, final_reward=1.0) for _ in range(3)]
    loss = TrajectoryFactory.create(success=False, final_reward=0.0, termination="max_steps")
    html = reviewer_client.get("/trajectories/?success=false").content.decode()
    assert str(loss.trajectory_id)[:8] in html
    assert not any(str(w.trajectory_id)[:8] in html for w in wins)
    html = reviewer_client.get("/trajectories/?termination=max_steps").content.decode()
    assert str(loss.trajectory_id)[:8] in html
    partial = reviewer_client.get("/trajectories/?success=true", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and str(wins[0].trajectory_id)[:8] in partial


def test_the_trajectory_list_pages_with_a_keyset(reviewer_client: Client) -> None:
    made = {str(TrajectoryFactory.create().trajectory_id)[:8] for _ in range(60)}
    first = reviewer_client.get("/trajectories/")
    cursor = first.context["next_before"]
    assert cursor and len(first.context["trajectories"]) == 50
    second = reviewer_client.get("/trajectories/", {"before": cursor})
    shown = {str(t.trajectory_id)[:8] for t in first.context["trajectories"] + second.context["trajectories"]}
    assert shown == made and not second.context["next_before"]
    assert reviewer_client.get("/trajectories/", {"before": "garbage"}).status_code == 200


def test_provenance_shows_a_zero_temperature_and_dashes_for_missing_values(reviewer_client: Client) -> None:
    trajectory = TrajectoryFactory.create(policy={"kind": "hf", "model": "m", "temperature": 0, "seed": None})
    html = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    assert "<dt>Temperature</dt><dd>0</dd>" in html
    assert "<dt>Seed</dt><dd>–</dd>" in html and "<dt>Checkpoint</dt><dd>–</dd>" in html
