"""Bulk verification: imported trajectories' claimed rewards become verified ones, through the
reward service, from the `score` command and the API; idempotent per (trajectory, spec version)."""

from __future__ import annotations

import json
import time
import uuid
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from rewards.models import Reward, ScoringFailure, ScoringRun
from tasks.models import Task, TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, client_for
from trajectories.models import Trajectory
from trajectories.services import import_trajectories

TRAJECTORIES = 1000
TASKS = ("task_0001", "task_0002")


def record(task: Task, patch: str, n: int, claimed: float) -> dict[str, Any]:
    return {
        "trajectory_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"bulk-{n}")),
        "task_id": task.task_id,
        "policy": {"kind": "replay", "model": "swe-agent-export"},
        "steps": [
            {"step": 1, "action_type": "read_file", "action_input": {"path": "README.md"}, "observation": "..."},
            {"step": 2, "action_type": "submit", "action_input": {}, "observation": ""},
        ],
        "patch": patch,
        "final_reward": claimed,  # what the file claims; never trusted
        "success": claimed > 0,
        "termination": "submitted",
        "source": "imported",
    }


def import_file(tmp_path: Path, count: int) -> list[Task]:
    """`count` imported trajectories over two tasks, half fixing it and half not (all claiming success)."""
    for task_id in TASKS:
        import_task_dirs(DEMO / "tasks" / task_id, "bulk")
    tasks = list(TaskSuite.objects.get(name="bulk").tasks.order_by("task_id"))
    path = tmp_path / "imported.jsonl"
    with path.open("w") as out:
        for n in range(count):
            task = tasks[n % len(tasks)]
            patch = task.expected_patch if n % 4 < 2 else ""
            out.write(json.dumps(record(task, patch, n, claimed=1.0)) + "\n")
    assert import_trajectories(path).created == count
    return tasks


@pytest.mark.django_db
def test_score_imported_verifies_a_thousand_trajectories_with_progress_and_a_second_run_adds_nothing(
    tmp_path: Path,
) -> None:
    import_file(tmp_path, TRAJECTORIES)
    err, out = StringIO(), StringIO()
    started = time.monotonic()
    call_command("score", "--imported", stdout=out, stderr=err)
    took = time.monotonic() - started
    assert f"{TRAJECTORIES}/{TRAJECTORIES}" in err.getvalue()  # the progress bar ran to the end
    assert f"{TRAJECTORIES} scored, 0 already scored, 0 could not be scored" in out.getvalue()
    rows = Trajectory.objects.filter(source="imported")
    assert rows.filter(scored_at=None).count() == 0
    # Verified, not claimed: the half that changed nothing scores below zero though all claimed 1.0.
    assert rows.filter(success=True).count() == TRAJECTORIES // 2
    assert rows.filter(final_reward__lte=0).count() == TRAJECTORIES // 2
    assert Reward.objects.count() == TRAJECTORIES
    print(f"score --imported: {TRAJECTORIES} trajectories in {took:.1f} s")

    again = StringIO()
    call_command("score", "--imported", "--json", stdout=again)
    summary = json.loads(again.getvalue())
    assert (summary["scored"], summary["skipped"], summary["failed"]) == (0, TRAJECTORIES, 0)
    assert Reward.objects.count() == TRAJECTORIES
    assert ScoringRun.objects.filter(status="succeeded").count() == 2


@pytest.mark.django_db(transaction=True)  # --jobs scores in threads, each with its own connection
def test_score_under_another_spec_scores_again_and_unscorable_trajectories_say_why(tmp_path: Path) -> None:
    tasks = import_file(tmp_path, 8)
    unlinked = tmp_path / "unlinked.jsonl"
    line = record(tasks[0], "", 99, claimed=1.0)
    line["task_id"] = "not_here"
    unlinked.write_text(json.dumps(line) + "\n")
    import_trajectories(unlinked, allow_unknown_tasks=True)
    call_command("score", "--suite", "bulk", stdout=StringIO(), stderr=StringIO())
    spec = tmp_path / "strict.yaml"
    spec.write_text("name: strict\noutcome:\n  lambda_success: 0.5\n")
    out = StringIO()
    call_command("score", "--imported", "--spec", str(spec), "--jobs", "2", "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert (summary["scored"], summary["skipped"], summary["failed"]) == (8, 0, 1), list(
        ScoringFailure.objects.values_list("error", flat=True)
    )
    assert summary["spec_version"].startswith("strict@")
    failure = ScoringFailure.objects.get()
    assert failure.trajectory.task_ref == "not_here" and "not in this database" in failure.error


@pytest.mark.django_db
def test_the_score_command_refuses_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    bad_spec = tmp_path / "bad.yaml"
    bad_spec.write_text("outcome: [1, 2\n")
    cases = [
        (["--batch", "999"], "no batch 999"),
        (["--suite", "nope"], "no suite named 'nope'"),
        (["--imported", "--jobs", "0"], "--jobs must be between 1 and 16"),
        (["--imported", "--spec", str(tmp_path / "missing.yaml")], "missing.yaml"),
        (["--imported", "--spec", str(bad_spec)], "the reward spec is not YAML"),
    ]
    for args, message in cases:
        with pytest.raises(CommandError, match=message):
            call_command("score", *args, stdout=StringIO(), stderr=StringIO())
    assert ScoringRun.objects.count() == 0


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_api_queues_a_scoring_run_that_a_worker_completes_and_reports_its_progress(
    tmp_path: Path, researcher: User, reviewer: User, rewards_worker: object
) -> None:
    import_file(tmp_path, 12)
    client = client_for(researcher)
    url = "/api/v1/rewards/score/"
    response = client.post(url, {"filters": {"imported": True, "task": "task_0001"}}, content_type="application/json")
    assert response.status_code == 202, response.content
    run = response.json()
    assert run["status"] == "queued" and run["total"] == 6
    deadline = time.monotonic() + 180
    while run["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, run
        time.sleep(0.5)
        run = client.get(f"{url}{run['id']}/").json()
    assert run["status"] == "succeeded" and (run["done"], run["scored"], run["failed"]) == (6, 6, 0), run
    assert Trajectory.objects.filter(task_ref="task_0001", scored_at=None).count() == 0
    assert Trajectory.objects.filter(task_ref="task_0002").exclude(scored_at=None).count() == 0

    again = client.post(url, {"filters": {"imported": True, "task": "task_0001"}}, content_type="application/json")
    assert again.status_code == 202
    # Reviewers read, researchers launch; a typo'd filter is refused naming it, and nothing is queued.
    assert client_for(reviewer).post(url, {"filters": {}}, content_type="application/json").status_code == 403
    typo = client.post(url, {"filters": {"bacth": 3}}, content_type="application/json")
    assert typo.status_code == 400 and "bacth" in typo.content.decode()
    malformed = client.post(url, {"filters": {"batch": "three"}}, content_type="application/json")
    assert malformed.status_code == 400 and "batch" in malformed.content.decode()
    assert ScoringRun.objects.count() == 2
