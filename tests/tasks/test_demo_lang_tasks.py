"""The demo's Go and JavaScript suites: seeded by seed_demo with their language, validated by the validation
that verify_demo queues (the Go run about 1 s, the Vitest run about 1 s, per task and run).

`tests/tasks/test_demo_tasks.py` runs demo/check_tasks.py over them too (fail before, pass after).
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from pytest_django import DjangoCaptureOnCommitCallbacks

from rewards.jobs import reward_check_job
from rewards.models import RewardCheck
from rewards.services import score_trajectory
from tasks.jobs import validate_suite_job
from tasks.models import Task, TaskSuite, ValidationRun
from tasks.services import validate_task
from tests.conftest import DEMO
from trajectories.models import Trajectory
from trajectories.replay import replay_trajectory

pytestmark = pytest.mark.django_db
SUITES = {"demo-go": "go", "demo-js": "javascript"}


@pytest.fixture
def seeded() -> str:
    # The Python suites are what other tests seed; named here, seed_demo leaves them alone.
    for name in ("demo", "demo-adversarial"):
        TaskSuite.objects.get_or_create(name=name)
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    call_command("seed_demo", stdout=io.StringIO())  # the second `make run` loads nothing again
    return out.getvalue()


def test_seed_demo_loads_a_go_suite_and_a_javascript_suite_once(seeded: str) -> None:
    for name, language in SUITES.items():
        suite = TaskSuite.objects.get(name=name)
        tasks = list(suite.tasks.order_by("task_id"))
        assert suite.split == "train" and len(tasks) == 3, name
        assert {t.metadata["language"] for t in tasks} == {language}
        assert all(t.expected_patch and t.fail_to_pass and t.pass_to_pass for t in tasks)
        assert f"{name} suite: 3 tasks" in seeded


def test_verify_demo_validates_them_and_leaves_the_reward_check_to_the_python_suites(
    seeded: str, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    sent: list[int] = []
    monkeypatch.setattr(validate_suite_job, "delay", sent.append)
    monkeypatch.setattr(reward_check_job, "delay", lambda pk: None)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("verify_demo", stdout=io.StringIO())
    runs = {run.suite.name: run for run in ValidationRun.objects.select_related("suite")}
    assert set(SUITES) <= set(runs) and {runs[name].pk for name in SUITES} <= set(sent)
    assert [runs[name].runs for name in SUITES] == [1, 1] and runs["demo"].runs == 3
    assert not RewardCheck.objects.filter(suite__name__in=SUITES).exists()


@pytest.mark.parametrize("task_id", ["go_0003", "js_0001"])
def test_a_demo_task_of_each_language_validates_with_its_own_lists(seeded: str, task_id: str) -> None:
    task = Task.objects.get(task_id=task_id)
    listed = (list(task.fail_to_pass), sorted(task.pass_to_pass))
    report = validate_task(task, runs=1)
    task.refresh_from_db()
    assert report.status == task.validation_status == "valid", task.validation_report["reasons"]
    # The runner's own ids, failing on the base and passing with the expected patch, are the ones listed.
    assert (task.fail_to_pass, sorted(task.pass_to_pass)) == listed
    assert len(task.fail_to_pass) == 2


LANG_RECORDS = [json.loads(line) for line in (DEMO / "lang_trajectories.jsonl").read_text().splitlines() if line]


def test_seed_demo_loads_their_trajectories_which_replay_and_score_as_they_claim(seeded: str) -> None:
    assert f"Go and JavaScript demo trajectories: {len(LANG_RECORDS)}" in seeded
    assert {r["task_id"][:2] for r in LANG_RECORDS} == {"go", "js"}
    for record in LANG_RECORDS:
        trajectory_id = record["trajectory_id"]
        stored = Trajectory.objects.get(trajectory_id=trajectory_id)
        assert stored.task is not None and stored.language == stored.task.language != "python"
        replay = replay_trajectory(trajectory_id, backend="bwrap")
        assert replay.reproducible and replay.same == replay.steps == len(record["steps"]), replay.differences[:1]
        # What the file claims is what the reward service finds: the real runner, in the sandbox.
        scored = score_trajectory(trajectory_id, backend="bwrap")
        assert (scored.resolved, scored.reward == 1.0) == (record["success"], record["success"]), scored.flags
