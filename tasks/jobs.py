"""Celery jobs for tasks: validation runs in the background, fanned out on the worker pool.

Jobs import the services inside their bodies: services import the jobs they enqueue at
the top, so the dependency runs one way (Baserow's jobs/handlers).
"""

from __future__ import annotations

import logging
import time

from celery import group, shared_task
from django.conf import settings

from core import states
from core.vocabulary import JobQueue
from tasks.models import Task, ValidationRun

logger = logging.getLogger(__name__)

# One task's validation: 2 x runs + 1 test runs of at most its timeout each, plus the scans.
TASK_TIME_LIMIT_S = 3 * 3600


@shared_task(queue=JobQueue.DEFAULT, time_limit=600, acks_late=True)
def validate_suite_job(run_id: int) -> dict[str, str]:
    """Send one `validate_run_task_job` per task of the run's suite not yet done in this run.

    The tasks then run side by side on every worker of the pool, each alone: one that fails is
    that task's result, never the run's end. A retry of this job sends only what is still to do.
    """
    from tasks.services import begin_validation_run

    run = ValidationRun.objects.select_related("suite").get(pk=run_id)
    if run.status in (ValidationRun.Status.SUCCEEDED, ValidationRun.Status.FAILED):
        logger.info("validation run %s already %s; nothing to do", run_id, run.status)
        return run.results
    pending = begin_validation_run(run)
    logger.info(
        "validation run %s started: suite %s, %d task(s) sent to the pool, %d runs each",
        run_id,
        run.suite.name,
        len(pending),
        run.runs,
    )
    if pending:
        group(validate_run_task_job.s(run_id, pk) for pk in pending).apply_async()
    return run.results


@shared_task(queue=JobQueue.DEFAULT, time_limit=TASK_TIME_LIMIT_S, acks_late=True)
def validate_run_task_job(run_id: int, task_pk: int) -> str:
    """Validate one task of a run and record its result; the run's last task finishes the run."""
    from tasks.services import COULD_NOT_VALIDATE, record_validation_progress, validate_task

    run = ValidationRun.objects.get(pk=run_id)
    task = Task.objects.filter(pk=task_pk).first()
    if task is None:
        gone = "the task was deleted before it was validated"
        record_validation_progress(run, f"#{task_pk}", COULD_NOT_VALIDATE, gone)
        return COULD_NOT_VALIDATE
    if run.status in (ValidationRun.Status.SUCCEEDED, ValidationRun.Status.FAILED) or task.task_id in run.results:
        return run.results.get(task.task_id, "")  # a redelivered message: the task is done
    started = time.monotonic()
    # A task's validation runs its tests 2 x runs + 1 times: minutes on a busy machine. The run
    # beats meanwhile, so the sweep takes only a run whose every job is gone for one in trouble.
    with states.Heartbeat(ValidationRun.objects.filter(pk=run_id), float(settings.CRUCIBLE_STALE_S) / 4):
        try:
            status, error = validate_task(task, runs=run.runs).status, ""
        except Exception as exc:  # noqa: BLE001 - one task that cannot run says nothing about the others
            logger.exception("validation run %s: task %s could not be validated", run_id, task.task_id)
            status, error = COULD_NOT_VALIDATE, f"{type(exc).__name__}: {exc}"
    logger.info("validation run %s: task %s is %s (%.1f s)", run_id, task.task_id, status, time.monotonic() - started)
    record_validation_progress(run, task.task_id, status, error)
    return status
