"""Repairing a suite's environments in place: detect each task's again, with other options.

A suite built with the wrong runner (an environment that "builds" with no pytest in it) has every
task invalid for the same reason. `build_env --suite NAME --pytest SPEC` detects each task's
environment again from its stored snapshot with the new options, writes the new spec into the
tasks whose environment changed (their version changes with it, and their validation is void),
builds each distinct environment once, and, with `--validate`, validates the changed tasks again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import transaction

from sandbox.environments import EnvBuildError
from tasks.builders.environment import detect_environment
from tasks.environments import Prepared, prepare_environment
from tasks.models import Task, TaskSuite
from tasks.services import TaskStoreError, task_spec_for
from tasks.taskdir import task_version


@dataclass
class Repair:
    changed: list[str] = field(default_factory=list)  # task ids whose environment changed
    unchanged: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # task id -> why no environment could be named
    environments: list[Prepared] = field(default_factory=list)


def repair_environments(
    suite: TaskSuite, pytest: str = "", variables: Sequence[tuple[str, str]] = (), *, rebuild: bool = False
) -> Repair:
    repair = Repair()
    specs = {}
    for task in suite.tasks.order_by("task_id"):
        try:
            snapshot = task_spec_for(task).base_dir
            detected = detect_environment(snapshot, pytest, variables).spec
        except (TaskStoreError, EnvBuildError) as exc:
            repair.errors[task.task_id] = str(exc)[:500]
            continue
        if detected is not None:
            specs[detected.spec_hash()] = detected
        wanted = detected.to_json() if detected is not None else None
        if (task.metadata or {}).get("environment") == wanted and "environment_error" not in (task.metadata or {}):
            repair.unchanged += 1
            continue
        _set_environment(task, wanted)
        repair.changed.append(task.task_id)
    repair.environments = [prepare_environment(spec, suite.name, rebuild=rebuild) for spec in specs.values()]
    return repair


@transaction.atomic
def _set_environment(task: Task, spec: dict[str, object] | None) -> None:
    """The task's environment changed: a new version, its old validation no longer says anything."""
    meta = {k: v for k, v in (task.metadata or {}).items() if k not in ("environment", "environment_error")}
    if spec is not None:
        meta["environment"] = spec
    task.metadata = meta
    task.version = task_version(task.statement, meta, task.expected_patch, task.snapshot_hash, task.tests_hash)
    task.validation_status = Task.Validation.UNVALIDATED
    task.validation_report = {}
    task.save(update_fields=["metadata", "version", "validation_status", "validation_report", "updated_at"])
