"""Celery jobs for tasks: validation runs in the background.

Jobs import the services inside their bodies: services import the jobs they enqueue at
the top, so the dependency runs one way (Baserow's jobs/handlers).
"""

from __future__ import annotations

import logging
import time

from celery import shared_task

from core.vocabulary import JobQueue
from tasks.models import ValidationRun

logger = logging.getLogger(__name__)


@shared_task(queue=JobQueue.DEFAULT, time_limit=6 * 3600, acks_late=True)
def validate_suite_job(run_id: int) -> dict[str, str]:
    """Validate every task of the run's suite not yet done in this run (so a retry resumes)."""
    from tasks.services import finish_validation_run, record_validation_progress, validate_task

    run = ValidationRun.objects.select_related("suite").get(pk=run_id)
    if run.status in (ValidationRun.Status.SUCCEEDED, ValidationRun.Status.FAILED):
        logger.info("validation run %s already %s; nothing to do", run_id, run.status)
        return run.results
    started = time.monotonic()
    logger.info("validation run %s started: suite %s, %d runs per task", run_id, run.suite.name, run.runs)
    ValidationRun.objects.filter(pk=run_id).update(status=ValidationRun.Status.RUNNING)
    try:
        for task in run.suite.tasks.order_by("task_id"):
            if task.task_id in run.results:
                continue
            report = validate_task(task, runs=run.runs)
            logger.info("validation run %s: task %s is %s", run_id, task.task_id, report.status)
            record_validation_progress(run, task.task_id, report.status)
    except Exception as exc:
        logger.exception("validation run %s failed after %.1f s", run_id, time.monotonic() - started)
        finish_validation_run(run, error=f"{type(exc).__name__}: {exc}")
        raise
    finish_validation_run(run)
    logger.info("validation run %s finished in %.1f s: %d tasks", run_id, time.monotonic() - started, len(run.results))
    return run.results
