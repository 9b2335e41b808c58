"""Validation catches what makes a task untrustworthy (issue 5's list), and passes good tasks."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.core.management import CommandError, call_command
from django.test import Client

from tasks.jobs import validate_suite_job
from tasks.models import Task, TaskSuite, ValidationRun
from tasks.services import import_task_dirs, start_validation_run, validate_task
from tests.conftest import DEMO, client_for
from tests.webapp.test_live import headers_for
from webapp.asgi import application
from webapp.celery import app

pytestmark = pytest.mark.django_db


def broken_task(tmp_path: Path, change: Callable[[Path], None], task_id: str = "task_0001") -> Task:
    dest = tmp_path / "tasks" / task_id
    shutil.copytree(DEMO / "tasks" / task_id, dest)
    change(dest)
    import_task_dirs(dest, "checks")
    return Task.objects.get(task_id=task_id)


def reasons(task: Task) -> str:
    return " | ".join(task.validation_report["reasons"])


def test_a_good_task_is_valid_with_stable_lists(tmp_path: Path) -> None:
    def drop_lists(d: Path) -> None:
        meta = json.loads((d / "metadata.json").read_text())
        del meta["fail_to_pass"], meta["pass_to_pass"]
        (d / "metadata.json").write_text(json.dumps(meta))

    task = broken_task(tmp_path, drop_lists)
    report = validate_task(task, runs=2)
    task.refresh_from_db()
    assert report.status == task.validation_status == "valid", reasons(task)
    # Computed lists are stored when the metadata had none.
    assert task.fail_to_pass == ["tests/test_parse_config.py::test_empty_input"]
    assert "tests/test_parse_config.py::test_basic" in task.pass_to_pass
    assert task.validation_report["license"] == "MIT"


def test_a_flaky_test_is_quarantined(tmp_path: Path) -> None:
    def add_flaky(d: Path) -> None:
        (d / "tests" / "test_flaky.py").write_text(
            "import os\n\ndef test_coin():\n    assert os.urandom(1)[0] % 2 == 0\n"
        )

    task = broken_task(tmp_path, add_flaky)
    report = validate_task(task, runs=8)
    assert report.status == "flaky"
    assert "tests/test_flaky.py::test_coin" in report.flaky
    task.refresh_from_db()
    assert "tests/test_flaky.py::test_coin" not in task.fail_to_pass + task.pass_to_pass


def test_tests_that_already_pass_before_the_fix_make_the_task_invalid(tmp_path: Path) -> None:
    def pass_already(d: Path) -> None:
        (d / "tests" / "test_parse_config.py").write_text(
            "from configkit import parse_config\n\n"
            "def test_empty_input():\n    assert parse_config('a = 1') == {'a': 1}\n"
        )

    task = broken_task(tmp_path, pass_already)
    report = validate_task(task, runs=2)
    assert report.status == "invalid"
    assert "no test fails before the fix" in reasons(Task.objects.get(pk=task.pk))


def test_a_statement_that_leaks_the_patch_is_invalid(tmp_path: Path) -> None:
    def leak(d: Path) -> None:
        added = next(
            line[1:]
            for line in (d / "expected_patch").read_text().splitlines()
            if line.startswith("+") and not line.startswith("+++")
        )
        (d / "task.md").write_text((d / "task.md").read_text() + f"\n\nHint: write `{added.strip()}`\n")

    task = broken_task(tmp_path, leak)
    assert validate_task(task, runs=1).status == "invalid"
    assert "leaks the answer: patch line" in reasons(Task.objects.get(pk=task.pk))


def test_a_planted_aws_key_is_caught(tmp_path: Path) -> None:
    def plant(d: Path) -> None:
        (d / "repo_snapshot" / "deploy.py").write_text('AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"\n')

    task = broken_task(tmp_path, plant)
    report = validate_task(task, runs=1)
    assert report.status == "invalid"
    secrets = next(c for c in report.checks if c.name == "no_secrets").evidence
    assert any(s["type"] == "AWS Access Key" and s["where"].endswith("deploy.py") for s in secrets)


def unlicense(d: Path) -> None:
    (d / "repo_snapshot" / "LICENSE").unlink()
    meta = json.loads((d / "metadata.json").read_text())
    meta.pop("license")
    (d / "metadata.json").write_text(json.dumps(meta))


def test_an_unlicensed_repository_is_flagged_for_a_person(tmp_path: Path) -> None:
    task = broken_task(tmp_path, unlicense)
    report = validate_task(task, runs=1)
    assert report.status == "invalid" and report.needs_review and report.license is None
    assert "a person must decide" in reasons(Task.objects.get(pk=task.pk))


def test_a_licence_off_the_allowlist_is_refused(tmp_path: Path, settings: Any) -> None:
    settings.CRUCIBLE_LICENSE_ALLOWLIST = ["Apache-2.0"]
    task = broken_task(tmp_path, lambda d: None)
    assert validate_task(task, runs=1).status == "invalid"
    assert "licence MIT is not on the allowlist" in reasons(Task.objects.get(pk=task.pk))


def test_the_command_validates_a_suite_and_shows_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken_task(tmp_path, unlicense)
    with pytest.raises(CommandError, match="between 1 and 20"):
        call_command("validate_tasks", "--suite", "checks", "--runs", "0")
    call_command("validate_tasks", "--suite", "checks", "--runs", "1", verbosity=0)
    out = capsys.readouterr().out
    assert "0 valid, 0 flaky, 1 invalid" in out
    with pytest.raises(CommandError, match="no tasks match"):
        call_command("validate_tasks", "--suite", "nope")


@pytest.mark.django_db(transaction=True)
def test_a_validation_run_streams_progress_to_the_browser(tmp_path: Path, researcher: Any, reviewer: Any) -> None:
    for task_id in ("task_0002", "task_0003"):
        broken_task(tmp_path, lambda d: None, task_id)
    suite = TaskSuite.objects.get(name="checks")
    client = client_for(researcher)
    assert client_for(reviewer).post("/tasks/checks/validate/", {"runs": "1"}).status_code == 403
    assert client.post("/tasks/checks/validate/", {"runs": "99"}).status_code == 400
    headers = headers_for(reviewer)
    run = start_validation_run(suite, 1)

    async def watch() -> list[dict[str, Any]]:
        ws = WebsocketCommunicator(application, "/ws/", headers=headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"action": "subscribe", "group": f"validation-{run.pk}"})
        await ws.receive_json_from(timeout=5)
        from asgiref.sync import sync_to_async

        app.conf.task_always_eager = True  # the per-task jobs the run sends out run here, now
        try:
            await sync_to_async(validate_suite_job)(run.pk)
        finally:
            app.conf.task_always_eager = False
        events = [(await ws.receive_json_from(timeout=10))["event"] for _ in range(3)]
        await ws.disconnect()
        return events

    events = async_to_sync(watch)()
    assert [e["kind"] for e in events] == ["task", "task", "finished"]
    assert [e["done"] for e in events] == [1, 2, 2] and events[-1]["status"] == "succeeded"
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.SUCCEEDED and run.results == {"task_0002": "valid", "task_0003": "valid"}
    html = Client().get("/")  # anonymous: still a login redirect
    assert html.status_code == 302
    page = client.get(f"/tasks/checks/validation/{run.pk}/").content.decode()
    assert 'data-group="validation-' in page and 'data-task="task_0002">valid<' in page
    task_page = client.get("/tasks/checks/task_0002/").content.decode()
    assert 'id="validation-report"' in task_page
