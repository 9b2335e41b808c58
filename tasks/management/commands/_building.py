"""What the builder commands share: judge each built task alone, validate, store the build report.

Not a command (the leading underscore keeps Django from loading it as one).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser
from tqdm import tqdm

from core.vocabulary import Split
from sandbox import SandboxError
from sandbox.hermetic import pytest_command
from tasks.builders.common import DEFAULT_TEST_COMMAND, BuildError
from tasks.builders.report import BuildReport
from tasks.models import Task, TaskSuite
from tasks.services import DEFAULT_SUITE, validate_task
from tasks.taskdir import TaskDirError, read_task_dir

logger = logging.getLogger(__name__)


def add_common_arguments(parser: CommandParser) -> None:
    parser.add_argument("--suite", default=None)
    parser.add_argument(
        "--split", choices=list(Split), default=None, help="the suite's split (default: train for a new suite)"
    )
    parser.add_argument(
        "--test-command",
        default=DEFAULT_TEST_COMMAND,
        help=f"the tasks' test command, `pytest ...` or `python -m pytest ...` (default: {DEFAULT_TEST_COMMAND!r})",
    )
    parser.add_argument("--repo-name", default="", help="owner/name (default: from the origin remote's URL)")
    parser.add_argument("--validate", action="store_true", help="validate each built task")
    parser.add_argument("--runs", type=int, default=3)


def check_test_command(command: str) -> None:
    """Refuse, before anything is built, a test command the hermetic harness would refuse at every run."""
    try:
        pytest_command(command)
    except SandboxError as exc:
        raise CommandError(f"--test-command: {exc}") from None


def keep_if_readable(task_dir: Path, report: BuildReport, candidate: str, subject: str, suite: str | None) -> bool:
    """A written task directory the importer would refuse is dropped here, so it cannot sink the others."""
    reason, detail = "", ""
    try:
        read_task_dir(task_dir)
    except TaskDirError as exc:
        reason, detail = "the task directory is not importable", str(exc)
    owner = Task.objects.filter(task_id=task_dir.name).exclude(suite__name=suite or DEFAULT_SUITE).first()
    if owner is not None and not reason:
        reason, detail = "the task already belongs to another suite", owner.suite.name
    if reason:
        shutil.rmtree(task_dir, ignore_errors=True)
        report.skip(candidate, subject, reason, detail)
        return False
    report.built.append(task_dir.name)
    return True


def validate_and_store(report: BuildReport, suite: str, runs: int, validate: bool, quiet: bool, err: Any) -> str:
    """Validate the built tasks one by one (one that cannot run is recorded, not raised); store the report."""
    if validate:
        tasks = list(Task.objects.filter(task_id__in=report.built).order_by("task_id"))
        for task in tqdm(tasks, desc="validating", unit="task", disable=quiet, file=err):
            try:
                result = validate_task(task, runs)
            except (SandboxError, BuildError, OSError) as exc:
                logger.warning("build: validating %s failed: %s", task.task_id, exc)
                report.validated(task.task_id, "error", [f"validation could not run: {exc}"])
                continue
            report.validated(task.task_id, result.status, result.to_json()["reasons"])
    TaskSuite.objects.filter(name=suite).update(build_report=report.to_json())
    return summary(report.to_json())


def summary(data: Any) -> str:
    line = f"{data['candidates']} candidate(s) -> {data['built']} built"
    if data["validated"]:
        line += f" -> {data['valid']} valid of {data['validated']} validated"
    skipped = "; ".join(f"{n} {reason}" for reason, n in data["skipped_by_reason"].items())
    return line + (f" (skipped: {skipped})" if skipped else "")
