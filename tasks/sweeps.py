"""What the deployment's sweep (core.sweep) redoes for validation runs."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from core import states
from core.sweep import SweepContext, register
from tasks.jobs import validate_run_task_job, validate_suite_job
from tasks.models import ValidationRun

logger = logging.getLogger(__name__)


def stuck_validation_runs(context: SweepContext) -> int:
    """Validation runs nothing works on: queued with their job lost, or running with every beat stopped.

    Sending the run's job again sends only the tasks it has no result for (tasks.jobs); a task job
    still in the broker is not sent twice. A task that a dead worker was validating runs again.
    """
    held = context.broker.job_args(validate_suite_job.name)
    tasks_held = context.broker.job_args(validate_run_task_job.name)
    if held is None or tasks_held is None:
        return 0
    runs_held = {args[0] for args in held if args} | {args[0] for args in tasks_held if args}
    now = timezone.now()
    lost_queued = Q(status=states.QUEUED, created_at__lt=now - timedelta(seconds=context.lost_after))
    count = 0
    for run in ValidationRun.objects.filter(lost_queued | states.stale(float(settings.CRUCIBLE_STALE_S))):
        if run.pk in runs_held:
            continue
        # One sweep at a time sends it: the beat moved on, so the next sweep sees it alive again.
        touched = ValidationRun.objects.filter(pk=run.pk, status=run.status, heartbeat_at=run.heartbeat_at)
        if touched.update(heartbeat_at=now):
            validate_suite_job.delay(run.pk)
            count += 1
    if count:
        logger.warning("%d validation runs had nothing working on them; sent again", count)
    return count


def connect() -> None:
    register("validation", stuck_validation_runs)
