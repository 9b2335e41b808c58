"""Verbs that change tasks and suites."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from core import states
from core.audit import AuditAction, record
from core.live import group_name, publish_on_commit
from core.vocabulary import LiveGroup, Split, values
from sandbox.environments import EnvBuildError, EnvSpec
from sandbox.node_versions import choice_from_metadata
from tasks.archives import is_archive, tasks_root, unpack_archive
from tasks.audit import record_task_import
from tasks.jobs import validate_suite_job
from tasks.lang_tests import go_toolchain_of, language_of
from tasks.models import Task, TaskSuite, ValidationRun
from tasks.redaction import redact_task_dir
from tasks.script_verifier import ScriptVerifier, ScriptVerifierError
from tasks.secrets import SECRETS_BASELINE_KEY, clean_hashes
from tasks.spec import (
    TaskSpec,
    environment_spec,
    verifier_spec,
)
from tasks.storage import TreeError, put_tree, tree_path
from tasks.taskdir import TaskDir, TaskDirError, argument_path, find_task_dirs, read_task_dir
from tasks.tree_cache import fetch_tree, publish_tree
from tasks.validation import NO_THRESHOLDS, Thresholds, ValidationReport, validate

DEFAULT_SUITE = "default"
# A task's result in a validation run (and a build report) when it could not be validated at all.
COULD_NOT_VALIDATE = "error"


class TaskStoreError(ValueError):
    pass


def task_spec_for(task: Task) -> TaskSpec:
    """The plain-Python view of a stored task that scoring and validation run on."""
    # On a worker host without a shared disk the trees come from the object store, once.
    try:
        base, tests = fetch_tree(task.snapshot_hash), fetch_tree(task.tests_hash)
    except TreeError as exc:
        raise TaskStoreError(f"task {task.task_id}: {exc}") from None
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
        environment=task_environment_spec(task),
        environment_error=str((task.metadata or {}).get("environment_error", ""))[:2000],
        expected_patch=task.expected_patch,
        statement=task.statement,
        visible_tests=tuple(task.visible_tests),
        verifier=task_verifier_spec(task),
        language=language_of(task.metadata or {}),
        node=choice_from_metadata(task.metadata or {}),
        go_toolchain=go_toolchain_of(task.metadata or {}),
    )


def task_verifier_spec(task: Task) -> ScriptVerifier | None:
    try:
        return verifier_spec(task.metadata or {})
    except ScriptVerifierError as exc:
        raise TaskStoreError(f"task {task.task_id}: {exc}") from None


def task_environment_spec(task: Task) -> EnvSpec | None:
    """The environment the task's metadata names; a malformed one is the task's error, not a crash."""
    try:
        return environment_spec(task.metadata or {})
    except EnvBuildError as exc:
        raise TaskStoreError(f"task {task.task_id}: {exc}") from None


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
    """Import one task directory, a folder of them, or an archive of either into a suite.

    Every directory is read and checked before anything is written, so one bad task
    leaves the database as it was. Re-importing the same content changes nothing; a
    task whose content changed gets the new content and a new version.
    """
    if is_archive(path) and not path.is_dir():
        return _import_archive(path, suite_name, split, progress)
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
        _store_trees(task)

    return _save_tasks(parsed, suite_name or DEFAULT_SUITE, split)


def _store_trees(task: TaskDir) -> None:
    """Copy a checked task's trees into the store, insisting they still hold what was checked."""
    for directory, checked in ((task.snapshot_dir, task.snapshot_hash), (task.tests_dir, task.tests_hash)):
        # When the store already holds exactly what was checked, there is nothing to read again.
        if not tree_path(checked).is_dir():
            try:
                stored, _ = put_tree(directory)
            except TreeError as exc:
                raise TaskDirError(f"{task.path}: {exc}") from None
            if stored != checked:
                # Someone changed (or swapped) the folder between our reading and our copying.
                raise TaskDirError(f"{directory}: changed while it was being imported; import it again")
        publish_tree(checked)  # other hosts fetch it by hash (no-op without shared storage)


def _import_archive(
    archive: Path, suite_name: str | None, split: str | None, progress: Callable[[Iterable[Path]], Iterable[Path]]
) -> TaskImportResult:
    # A fresh private folder (mkdtemp, 0700) that nobody else can have prepared or watch.
    with tempfile.TemporaryDirectory(prefix="crucible-import-") as tmp:
        unpack_archive(archive, Path(tmp))
        try:
            return import_task_dirs(tasks_root(Path(tmp)), suite_name, split, progress)
        except TaskDirError as exc:
            # Name the archive, not the temporary folder it was unpacked into.
            raise TaskDirError(str(exc).replace(tmp, str(archive))) from None


def task_spec_from_dir(path: Path) -> TaskSpec:
    """Score a task directory from the store, never from the directory itself.

    The directory gets the import's checks, then its trees are copied into the
    content-addressed store and the spec points there: nothing a link in the directory
    (or a change to it after the check) leads to can reach a sandbox.
    """
    task = read_task_dir(argument_path(path))
    _store_trees(task)
    try:
        return TaskSpec.from_metadata(
            task.metadata,
            base_dir=tree_path(task.snapshot_hash),
            tests_dir=tree_path(task.tests_hash),
            statement=task.statement,
            expected_patch=task.expected_patch,
        )
    except EnvBuildError as exc:
        raise TaskDirError(f"{path}: {exc}") from None


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
        redactions = redact_task_dir(task)  # before model_fields(): the version is of the clean text
        fields = task.model_fields()
        current = existing.get(task.task_id)
        if current is None:
            row = Task.objects.create(task_id=task.task_id, suite=suite, **fields)
            record_task_import(row, task, redactions)
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
        record_task_import(current, task, redactions)
        result.updated += 1
    return result


def validate_task(
    task: Task,
    runs: int = 5,
    backend: str | None = None,
    progress: Callable[[str], None] = lambda _: None,
    thresholds: Thresholds = NO_THRESHOLDS,
) -> ValidationReport:
    """Validate one task and store its report; computed test lists fill in missing ones."""
    spec, arguments = validation_inputs(task, runs, backend, thresholds)
    report = validate(spec, **arguments, progress=progress)
    store_validation(task, report)
    return report


def validation_inputs(
    task: Task, runs: int, backend: str | None = None, thresholds: Thresholds = NO_THRESHOLDS
) -> tuple[TaskSpec, dict[str, Any]]:
    """`tasks.validation.validate`'s arguments for a task, all plain data: another process can run it."""
    return task_spec_for(task), {
        "statement": task.statement,
        "expected_patch": task.expected_patch,
        "base_commit": task.base_commit,
        "declared_license": task.license,
        "source": task.source,
        "license_allowlist": list(settings.CRUCIBLE_LICENSE_ALLOWLIST),
        "runs": runs,
        "backend": backend or settings.CRUCIBLE_SANDBOX_BACKEND,
        "thresholds": thresholds,
        "secrets_baseline": sorted(clean_hashes((task.metadata or {}).get(SECRETS_BASELINE_KEY))),
    }


def store_validation(task: Task, report: ValidationReport) -> None:
    fields = ["validation_status", "validation_report", "updated_at"]
    task.validation_status = report.status
    task.validation_report = report.to_json()
    if report.status != Task.Validation.INVALID and (not task.fail_to_pass or report.flaky):
        # Stored lists leave out quarantined flaky tests.
        task.fail_to_pass, task.pass_to_pass = report.fail_to_pass, report.pass_to_pass
        fields += ["fail_to_pass", "pass_to_pass"]
    task.save(update_fields=fields)


def set_secrets_baseline(tasks: Iterable[Task], hashes: Collection[str]) -> int:
    """Store a reviewed baseline on tasks: every later validation counts those findings as reviewed.

    Only detect-secrets' hashes are kept, never a secret. The task's version stays: a review
    changes nothing an agent sees or runs.
    """
    stored = sorted(clean_hashes(hashes))
    count = 0
    for task in tasks:
        task.metadata = {**(task.metadata or {}), SECRETS_BASELINE_KEY: stored}
        task.save(update_fields=["metadata", "updated_at"])
        count += 1
    return count


def start_validation_run(suite: TaskSuite, runs: int, user: User | AnonymousUser | None = None) -> ValidationRun:
    if runs < 1 or runs > 20:
        raise TaskDirError("runs must be between 1 and 20")
    with transaction.atomic():
        run = ValidationRun.objects.create(
            suite=suite, runs=runs, total=suite.tasks.count(), created_by=user if isinstance(user, User) else None
        )
        record(user, AuditAction.LAUNCH, run, kind="validation", suite=suite.name, runs=runs)
        transaction.on_commit(lambda: validate_suite_job.delay(run.pk))
    return run


def begin_validation_run(run: ValidationRun) -> list[int]:
    """Mark the run running and fix what it covers: the primary keys of its tasks still to validate.

    The total is counted now, not when the run was asked for, so tasks added meanwhile are in
    it and the run's last task knows it is the last. A run with nothing left finishes here.
    """
    tasks = list(run.suite.tasks.order_by("task_id").values_list("pk", "task_id"))
    with transaction.atomic():
        locked = ValidationRun.objects.select_for_update().get(pk=run.pk)
        if locked.status in states.DONE:
            return []
        pending = [pk for pk, task_id in tasks if task_id not in locked.results]
        # Sent again by the sweep, a running run stays running: its missing tasks go out again.
        if locked.status != ValidationRun.Status.RUNNING:
            states.transition(locked, states.RUNNING, only_from=[states.QUEUED])
        locked.total = len(locked.results) + len(pending)
        locked.heartbeat_at = timezone.now()
        locked.save(update_fields=["total", "heartbeat_at"])
        _finish_if_done(locked)
    run.status, run.total = locked.status, locked.total
    return pending if locked.status == ValidationRun.Status.RUNNING else []


def record_validation_progress(run: ValidationRun, task_id: str, status: str, error: str = "") -> None:
    """One task of a run is done (`error`: why it could not be validated); the last one finishes the run.

    Tasks finish in any order on any worker: the row is locked, so counts and the finish are
    decided once, and the browser hears of each only after the commit.
    """
    with transaction.atomic():
        locked = ValidationRun.objects.select_for_update().get(pk=run.pk)
        if locked.status != ValidationRun.Status.RUNNING:
            return  # ended meanwhile (a late duplicate of a task the sweep sent again)
        locked.results[task_id] = status
        locked.done = len(locked.results)
        locked.heartbeat_at = timezone.now()
        fields = ["results", "done", "heartbeat_at"]
        if error:
            # Kept on the run as they come: what the page shows when the run ends failed.
            locked.error = (locked.error + f"{task_id}: {error}\n")[:5000]
            fields.append("error")
        locked.save(update_fields=fields)
        publish_on_commit(
            group_name(LiveGroup.VALIDATION, run.pk),
            {"kind": "task", "task_id": task_id, "status": status, "done": locked.done, "total": locked.total},
        )
        _finish_if_done(locked)
    run.done, run.results, run.status, run.error = locked.done, locked.results, locked.status, locked.error


def _finish_if_done(locked: ValidationRun) -> None:
    """Inside the transaction holding the run's lock: succeeded, or failed naming the tasks that could not run."""
    if locked.status != ValidationRun.Status.RUNNING or locked.done < locked.total:
        return
    failed = sorted(task_id for task_id, status in locked.results.items() if status == COULD_NOT_VALIDATE)
    if failed:
        locked.error = (f"{len(failed)} task(s) could not be validated: {', '.join(failed[:20])}\n" + locked.error)[
            :5000
        ]
    finish_validation_run(locked, error=locked.error if failed else "")


def finish_validation_run(run: ValidationRun, error: str = "") -> None:
    with transaction.atomic():
        ended = ValidationRun.Status.FAILED if error else ValidationRun.Status.SUCCEEDED
        if not states.transition(run, ended, error=error[:5000], finished_at=timezone.now()):
            return
        publish_on_commit(
            group_name(LiveGroup.VALIDATION, run.pk),
            {"kind": "finished", "status": run.status, "error": run.error, "done": run.done, "total": run.total},
        )
