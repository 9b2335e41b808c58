"""Verbs that change how existing tasks are used: a suite's split, a task's test command.

Both decide what a validation means (which tests run; what may be trained on), so each change
is audited with both sides, leaves the tasks unvalidated, and starts a validation run of the
suite unless the caller validates itself (the commands do, with a progress bar).
"""

from __future__ import annotations

import logging

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from core.audit import AuditAction, record
from core.vocabulary import Split, values
from sandbox import SandboxError
from sandbox.hermetic import pytest_command
from tasks.models import Task, TaskSuite, ValidationRun
from tasks.services import start_validation_run
from tasks.taskdir import TaskDirError, task_version

logger = logging.getLogger(__name__)

Actor = User | AnonymousUser | None


class ChangeError(ValueError):
    """The change was refused; nothing was written."""


def change_split(suite: TaskSuite, split: str, user: Actor = None, runs: int | None = 3) -> ValidationRun | None:
    """Move a suite to another split; with `runs`, validate its tasks again in the background."""
    if split not in values(Split):
        raise ChangeError(f"split {split!r} is not one of {', '.join(values(Split))}")
    with transaction.atomic():
        locked = TaskSuite.objects.select_for_update().get(pk=suite.pk)
        before = locked.split
        locked.split = split
        locked.save(update_fields=["split"])
        # A split decides what may be trained on: the move is logged with both sides.
        record(user, AuditAction.CHANGE, locked, field="split", before=before, after=split)
        logger.info("suite %s moved from %s to %s", locked.name, before, split)
    suite.split = split
    return _revalidate(locked, runs, user)


def change_test_command(
    tasks: list[Task], command: str, user: Actor = None, runs: int | None = 3
) -> list[ValidationRun]:
    """Give tasks a new test command (checked as the hermetic harness would), new versions, no validation yet."""
    try:
        pytest_command(command)
    except SandboxError as exc:
        raise ChangeError(str(exc)) from None
    if len(command) > Task._meta.get_field("test_command").max_length:  # type: ignore[operator]
        raise ChangeError("test command is too long")
    suites: dict[int, TaskSuite] = {}
    with transaction.atomic():
        for task in Task.objects.select_for_update().filter(pk__in=[t.pk for t in tasks]).select_related("suite"):
            before = task.test_command
            if before == command:
                continue
            metadata = {**(task.metadata or {}), "test_command": command}
            task.test_command, task.metadata = command, metadata
            # The command is part of the task's content: a new version, and the old validation no longer holds.
            task.version = task_version(
                task.statement, metadata, task.expected_patch, task.snapshot_hash, task.tests_hash
            )
            task.validation_status, task.validation_report = Task.Validation.UNVALIDATED, {}
            task.save(update_fields=["test_command", "metadata", "version", "validation_status", "validation_report"])
            record(user, AuditAction.CHANGE, task, field="test_command", before=before, after=command)
            suites[task.suite_id] = task.suite
    return [run for suite in suites.values() if (run := _revalidate(suite, runs, user)) is not None]


def _revalidate(suite: TaskSuite, runs: int | None, user: Actor) -> ValidationRun | None:
    if runs is None:
        return None
    try:
        return start_validation_run(suite, runs, user)
    except TaskDirError as exc:
        raise ChangeError(str(exc)) from None
