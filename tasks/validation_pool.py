"""Validating many tasks side by side, each alone, for the commands (`--jobs N`).

Validation waits on sandboxes, so tasks overlap well. They run in worker processes, not
threads: the secrets scan configures detect-secrets through process-wide settings, which
two threads would change under each other. A worker process runs only the plain-Python
`tasks.validation.validate` on plain data; this process reads the tasks and stores every
report, so no database connection crosses a process boundary. Spawned, not forked: a fork
would copy this process's threads and open connections.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from tasks.models import Task
from tasks.services import store_validation, validate_task, validation_inputs
from tasks.validation import NO_THRESHOLDS, Thresholds, ValidationReport, validate

logger = logging.getLogger(__name__)

# (task, its report) when validated; (task, None, why) when it could not be.
OnDone = Callable[[Task, ValidationReport | None, str], None]


def default_jobs() -> int:
    """One validation per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def validate_tasks(
    tasks: Sequence[Task],
    runs: int,
    on_done: OnDone,
    *,
    jobs: int = 1,
    backend: str | None = None,
    thresholds: Thresholds = NO_THRESHOLDS,
    progress: Callable[[Task, str], None] = lambda task, step: None,
) -> None:
    """Validate and store each task, `jobs` at a time; `on_done` hears of each as it ends.

    A task that cannot be validated (its trees are gone, the sandbox fails, its worker process
    dies) is reported to `on_done` with the reason; the others go on.
    """
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            try:
                report = validate_task(
                    task,
                    runs,
                    backend,
                    progress=lambda step, task=task: progress(task, step),  # type: ignore[misc]
                    thresholds=thresholds,
                )
            except Exception as exc:  # noqa: BLE001 - one task that cannot run says nothing about the others
                logger.warning("validating %s failed: %s", task.task_id, exc)
                on_done(task, None, f"{type(exc).__name__}: {exc}")
                continue
            on_done(task, report, "")
        return
    broken = _in_pool(tasks, runs, on_done, min(jobs, len(tasks)), backend, thresholds)
    # A worker process that died took the pool with it, and every task still in it: each of
    # those runs again in a pool of its own, so only the task that kills its process fails.
    for task in broken:
        for again in _in_pool([task], runs, on_done, 1, backend, thresholds):
            on_done(again, None, "the validation process died")


def _in_pool(
    tasks: Sequence[Task],
    runs: int,
    on_done: OnDone,
    jobs: int,
    backend: str | None,
    thresholds: Thresholds,
) -> list[Task]:
    """Validate in a fresh pool of `jobs` processes; the tasks lost when a process died are returned."""
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
    futures: dict[Future[ValidationReport], Task] = {}
    broken: list[Task] = []
    try:
        for task in tasks:
            try:
                spec, arguments = validation_inputs(task, runs, backend, thresholds)
            except Exception as exc:  # noqa: BLE001 - a task whose trees are gone fails alone
                on_done(task, None, f"{type(exc).__name__}: {exc}")
                continue
            futures[pool.submit(validate, spec, **arguments)] = task
        for future in as_completed(futures):
            task = futures[future]
            try:
                report = future.result()
            except BrokenProcessPool:
                broken.append(task)
                continue
            except Exception as exc:  # noqa: BLE001 - raised in the worker for this task only
                logger.warning("validating %s failed: %s", task.task_id, exc)
                on_done(task, None, f"{type(exc).__name__}: {exc}")
                continue
            store_validation(task, report)
            on_done(task, report, "")
    finally:
        # On Ctrl-C, nothing more starts; what runs is left to finish or die with its sandbox.
        pool.shutdown(wait=not broken and all(f.done() for f in futures), cancel_futures=True)
    return sorted(broken, key=lambda t: t.task_id)
