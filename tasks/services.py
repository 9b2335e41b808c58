"""Verbs that change tasks and suites."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from core.live import group_name, publish_on_commit
from core.vocabulary import LiveGroup, Split, values
from tasks.jobs import validate_suite_job
from tasks.models import Task, TaskSuite, ValidationRun
from tasks.spec import TaskSpec
from tasks.storage import put_tree, tree_path
from tasks.taskdir import TaskDir, TaskDirError, find_task_dirs, read_task_dir
from tasks.validation import ValidationReport, validate

DEFAULT_SUITE = "default"


class TaskStoreError(ValueError):
    pass


def task_spec_for(task: Task) -> TaskSpec:
    """The plain-Python view of a stored task that scoring and validation run on."""
    base, tests = tree_path(task.snapshot_hash), tree_path(task.tests_hash)
    if not base.is_dir() or not tests.is_dir():
        raise TaskStoreError(f"task {task.task_id}: its snapshot or tests are missing from the store under var/")
    return TaskSpec(
        task_id=task.task_id,
        base_dir=base,
        tests_dir=tests,
        fail_to_pass=tuple(task.fail_to_pass),
        pass_to_pass=tuple(task.pass_to_pass),
        tests_dest=task.tests_dest,
        test_command=task.test_command,
        timeout_seconds=task.timeout_seconds,
    )


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
    if split is not None and split not in values(Split):
        raise TaskDirError(f"split {split!r} is not one of {', '.join(Split)}")

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
            raise TaskDirError(f"{task.path}: task {task.task_id!r} already belongs to suite {current.suite.name!r}")
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


def validate_task(
    task: Task, runs: int = 5, backend: str | None = None, progress: Callable[[str], None] = lambda _: None
) -> ValidationReport:
    """Validate one task and store its report; computed test lists fill in missing ones."""
    spec = task_spec_for(task)
    report = validate(
        spec,
        task.statement,
        task.expected_patch,
        base_commit=task.base_commit,
        declared_license=task.license,
        source=task.source,
        license_allowlist=settings.CRUCIBLE_LICENSE_ALLOWLIST,
        runs=runs,
        backend=backend or settings.CRUCIBLE_SANDBOX_BACKEND,
        progress=progress,
    )
    fields = ["validation_status", "validation_report", "updated_at"]
    task.validation_status = report.status
    task.validation_report = report.to_json()
    if report.status != Task.Validation.INVALID and (not task.fail_to_pass or report.flaky):
        # Stored lists leave out quarantined flaky tests.
        task.fail_to_pass, task.pass_to_pass = report.fail_to_pass, report.pass_to_pass
        fields += ["fail_to_pass", "pass_to_pass"]
    task.save(update_fields=fields)
    return report


def start_validation_run(suite: TaskSuite, runs: int, user: User | AnonymousUser | None = None) -> ValidationRun:
    if runs < 1 or runs > 20:
        raise TaskDirError("runs must be between 1 and 20")
    run = ValidationRun.objects.create(
        suite=suite, runs=runs, total=suite.tasks.count(), created_by=user if isinstance(user, User) else None
    )
    transaction.on_commit(lambda: validate_suite_job.delay(run.pk))
    return run


def record_validation_progress(run: ValidationRun, task_id: str, status: str) -> None:
    """One task of a run is done: save the count, then tell the browser after the commit."""
    with transaction.atomic():
        locked = ValidationRun.objects.select_for_update().get(pk=run.pk)
        locked.results[task_id] = status
        locked.done = len(locked.results)
        locked.save(update_fields=["results", "done"])
        publish_on_commit(
            group_name(LiveGroup.VALIDATION, run.pk),
            {"kind": "task", "task_id": task_id, "status": status, "done": locked.done, "total": locked.total},
        )
    run.done, run.results = locked.done, locked.results


def finish_validation_run(run: ValidationRun, error: str = "") -> None:
    run.status = ValidationRun.Status.FAILED if error else ValidationRun.Status.SUCCEEDED
    run.error = error[:5000]
    run.finished_at = timezone.now()
    with transaction.atomic():
        run.save(update_fields=["status", "error", "finished_at"])
        publish_on_commit(
            group_name(LiveGroup.VALIDATION, run.pk),
            {"kind": "finished", "status": run.status, "error": run.error, "done": run.done, "total": run.total},
        )
