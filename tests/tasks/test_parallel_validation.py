"""Validation side by side: `--jobs N` in the commands, the suite's ValidationRun fanned out on the
Celery worker pool. Same results as one at a time; one task that fails stops no other."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command

from tasks.jobs import validate_suite_job
from tasks.models import Task, TaskSuite, ValidationRun
from tasks.services import import_task_dirs, start_validation_run
from tests.conftest import DEMO, purge_queues, start_worker
from webapp.celery import app

TASKS = ("task_0001", "task_0002", "task_0005")


def demo_suite_of(name: str, task_ids: tuple[str, ...] = TASKS) -> TaskSuite:
    for task_id in task_ids:
        import_task_dirs(DEMO / "tasks" / task_id, name)
    return TaskSuite.objects.get(name=name)


def results(suite: str) -> dict[str, tuple[Any, ...]]:
    return {
        t.task_id: (t.validation_status, t.fail_to_pass, t.pass_to_pass, t.validation_report["reasons"])
        for t in Task.objects.filter(suite__name=suite)
    }


def lose_trees(task_id: str) -> None:
    """The task's snapshot is gone from the store: it cannot be validated (a TaskStoreError)."""
    Task.objects.filter(task_id=task_id).update(snapshot_hash="sha256:" + "0" * 64)


@pytest.mark.django_db
def test_parallel_validation_gives_the_results_of_serial_validation(capsys: pytest.CaptureFixture[str]) -> None:
    demo_suite_of("par")
    call_command("validate_tasks", "--suite", "par", "--runs", "2", "--jobs", "1", verbosity=0)
    serial = results("par")
    serial_out = capsys.readouterr().out
    Task.objects.filter(suite__name="par").update(validation_status="unvalidated", validation_report={})
    started = time.monotonic()
    call_command("validate_tasks", "--suite", "par", "--runs", "2", "--jobs", "3", verbosity=0)
    parallel_seconds = time.monotonic() - started
    assert results("par") == serial
    assert capsys.readouterr().out == serial_out
    assert {status for status, *_ in serial.values()} == {"valid"}
    print(f"3 tasks, 2 runs each, --jobs 3: {parallel_seconds:.1f} s")


@pytest.mark.django_db
def test_a_task_that_cannot_be_validated_stops_no_other(capsys: pytest.CaptureFixture[str]) -> None:
    demo_suite_of("par")
    lose_trees("task_0002")
    with pytest.raises(CommandError, match=r"1 task\(s\) could not be validated: task_0002: TaskStoreError"):
        call_command("validate_tasks", "--suite", "par", "--runs", "1", "--jobs", "2", verbosity=0)
    statuses = dict(Task.objects.filter(suite__name="par").values_list("task_id", "validation_status"))
    assert statuses == {"task_0001": "valid", "task_0002": "unvalidated", "task_0005": "valid"}
    assert "2 valid, 0 flaky, 0 invalid" in capsys.readouterr().out


@pytest.mark.django_db
def test_a_statement_under_the_quality_threshold_makes_the_task_invalid_with_its_own_reason() -> None:
    demo_suite_of("terse", ("task_0001",))
    Task.objects.filter(task_id="task_0001").update(statement="# Fix it\n")
    call_command("validate_tasks", "--suite", "terse", "--runs", "1", "--min-statement-quality", "0.5", verbosity=0)
    task = Task.objects.get(task_id="task_0001")
    assert task.validation_status == "invalid"
    (reason,) = task.validation_report["reasons"]
    score = task.validation_report["statement_quality"]["score"]
    assert reason.startswith(f"statement quality {score} < 0.5: 2 words") and "no expected behaviour named" in reason
    # Without a threshold the same statement is only advice.
    call_command("validate_tasks", "--suite", "terse", "--runs", "1", verbosity=0)
    assert Task.objects.get(task_id="task_0001").validation_status == "valid"
    with pytest.raises(CommandError, match="between 0 and 1"):
        call_command("validate_tasks", "--suite", "terse", "--min-statement-quality", "2", verbosity=0)


@pytest.mark.django_db
def test_a_validation_run_sends_one_job_per_task_to_the_pool() -> None:
    suite = demo_suite_of("fan")
    purge_queues("default")
    run = start_validation_run(suite, 1)
    validate_suite_job(run.pk)  # no worker here: the per-task jobs wait in the broker
    client = redis.Redis.from_url(app.conf.broker_url)
    try:
        messages = [json.loads(raw) for raw in client.lrange(f"{django_settings.REDIS_KEY_PREFIX}default", 0, -1)]
    finally:
        client.close()
        purge_queues("default")
    sent = sorted((m["headers"]["task"], tuple(m["headers"]["argsrepr"].strip("()").split(", "))) for m in messages)
    pks = sorted(Task.objects.filter(suite=suite).values_list("pk", flat=True))
    assert sent == sorted(("tasks.jobs.validate_run_task_job", (str(run.pk), str(pk))) for pk in pks)
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.RUNNING and run.total == 3 and run.done == 0


@pytest.fixture
def default_worker() -> Iterator[subprocess.Popen[bytes]]:
    yield from start_worker("default", name="validation-worker@%h")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_validation_run_on_a_real_worker_gathers_every_task_and_names_the_one_that_failed(
    default_worker: subprocess.Popen[bytes],
) -> None:
    suite = demo_suite_of("pool")
    lose_trees("task_0005")
    run = start_validation_run(suite, 1)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in (ValidationRun.Status.SUCCEEDED, ValidationRun.Status.FAILED):
            break
        assert default_worker.poll() is None, default_worker.stderr.read() if default_worker.stderr else ""
        time.sleep(0.5)
    assert run.results == {"task_0001": "valid", "task_0002": "valid", "task_0005": "error"}
    assert run.status == ValidationRun.Status.FAILED and (run.done, run.total) == (3, 3)
    assert run.error.startswith("1 task(s) could not be validated: task_0005\n")
    assert "task_0005: TaskStoreError" in run.error
    assert Task.objects.get(task_id="task_0001").validation_status == "valid"
