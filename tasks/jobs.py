"""Celery jobs for tasks: validation runs in the background."""

from __future__ import annotations

from celery import shared_task

from tasks.models import ValidationRun
from tasks.services import finish_validation_run, record_validation_progress, validate_task


@shared_task(queue="default", time_limit=6 * 3600, acks_late=True)
def validate_suite_job(run_id: int) -> dict[str, str]:
    """Validate every task of the run's suite not yet done in this run (so a retry resumes)."""
    run = ValidationRun.objects.select_related("suite").get(pk=run_id)
    if run.status in (ValidationRun.Status.SUCCEEDED, ValidationRun.Status.FAILED):
        return run.results
    ValidationRun.objects.filter(pk=run_id).update(status=ValidationRun.Status.RUNNING)
    try:
        for task in run.suite.tasks.order_by("task_id"):
            if task.task_id in run.results:
                continue
            report = validate_task(task, runs=run.runs)
            record_validation_progress(run, task.task_id, report.status)
    except Exception as exc:
        finish_validation_run(run, error=f"{type(exc).__name__}: {exc}")
        raise
    finish_validation_run(run)
    return run.results
