"""Verbs that change tasks and suites."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from tasks.models import Task, TaskSuite
from tasks.storage import put_tree
from tasks.taskdir import TaskDir, TaskDirError, find_task_dirs, read_task_dir

DEFAULT_SUITE = "default"


@dataclass
class TaskImportResult:
    suite: str
    created: int = 0
    updated: int = 0
    unchanged: int = 0


def import_task_dirs(
    path: Path,
    suite_name: str | None = None,
    split: str | None = None,
    progress: Callable[[Iterable[Path]], Iterable[Path]] = lambda it: it,
) -> TaskImportResult:
    """Import one task directory or a folder of them into a suite.

    Every directory is read and checked before anything is written, so one bad task
    leaves the database as it was. Re-importing the same content changes nothing; a
    task whose content changed gets the new content and a new version.
    """
    parsed: list[TaskDir] = [read_task_dir(p) for p in progress(find_task_dirs(path))]
    seen: dict[str, Path] = {}
    for task in parsed:
        if task.task_id in seen:
            raise TaskDirError(f"{task.path}: task_id {task.task_id!r} is also used by {seen[task.task_id]}")
        seen[task.task_id] = task.path
    if split is not None and split not in TaskSuite.Split.values:
        raise TaskDirError(f"split {split!r} is not one of {', '.join(TaskSuite.Split.values)}")

    # The tree store is content-addressed: writing trees first is safe, since a
    # failed transaction below leaves only unreferenced copies, never wrong ones.
    for task in parsed:
        put_tree(task.snapshot_dir)
        put_tree(task.tests_dir)

    return _save_tasks(parsed, suite_name or DEFAULT_SUITE, split)


@transaction.atomic
def _save_tasks(parsed: list[TaskDir], suite_name: str, split: str | None) -> TaskImportResult:
    suite, created = TaskSuite.objects.get_or_create(
        name=suite_name, defaults={"split": split or TaskSuite.Split.TRAIN}
    )
    if not created and split is not None and suite.split != split:
        raise TaskDirError(f"suite {suite_name!r} exists with split {suite.split!r}, not {split!r}")
    result = TaskImportResult(suite=suite.name)
    existing = {t.task_id: t for t in Task.objects.select_for_update().filter(task_id__in=[p.task_id for p in parsed])}
    for task in parsed:
        fields = task.model_fields()
        current = existing.get(task.task_id)
        if current is None:
            Task.objects.create(task_id=task.task_id, suite=suite, **fields)
            result.created += 1
            continue
        if current.suite_id != suite.pk:
            raise TaskDirError(
                f"{task.path}: task {task.task_id!r} already belongs to suite {current.suite.name!r}"
            )
        if current.version == fields["version"]:
            result.unchanged += 1
            continue
        for name, value in fields.items():
            setattr(current, name, value)
        # New content invalidates whatever validation said about the old one.
        current.validation_status = Task.Validation.UNVALIDATED
        current.validation_report = {}
        current.save()
        result.updated += 1
    return result
