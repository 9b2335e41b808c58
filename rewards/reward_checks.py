"""The suite page's reward check: reward_sanity's gap per task, as a row with states moved by a job.

`start_reward_check` keeps the request as a queued row and sends `reward_check_job` after the
commit; `run_reward_check` is what the job runs: one attempt holds the row (core.states), checks
each task with an expected patch under the active spec and ends the row with the blind tasks.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import states
from core.audit import AuditAction, record
from rewards.bulk import stale_after
from rewards.models import RewardCheck
from rewards.services import RewardError, active_spec, check_reward_sanity
from tasks.models import Task, TaskSuite
from tasks.services import TaskStoreError

logger = logging.getLogger(__name__)


class RewardCheckError(ValueError):
    """A suite whose reward cannot be checked; nothing was queued."""


def checkable_tasks(suite: TaskSuite) -> list[Task]:
    return list(suite.tasks.exclude(expected_patch="").order_by("task_id"))


def latest_reward_check(suite_id: int) -> RewardCheck | None:
    return RewardCheck.objects.filter(suite_id=suite_id).first()


def start_reward_check(suite: TaskSuite, user: Any = None) -> RewardCheck:
    """Queue a check of every task of `suite` with an expected patch, under the active reward spec."""
    total = len(checkable_tasks(suite))
    if not total:
        raise RewardCheckError("No task of this suite has an expected patch to check the reward against.")
    try:
        spec = active_spec()
    except RewardError as exc:
        raise RewardCheckError(str(exc)) from None
    with transaction.atomic():
        check = RewardCheck.objects.create(
            suite=suite, spec_version=spec.version, total=total, created_by=user if getattr(user, "pk", None) else None
        )
        record(user, AuditAction.LAUNCH, check, kind="reward_check", suite=suite.name, tasks=total)
        transaction.on_commit(lambda: _enqueue(check.pk))
    return check


def _enqueue(check_pk: int) -> None:
    # The job imports this module; importing it here, not at the top, keeps the cycle one-way.
    from rewards.jobs import reward_check_job

    reward_check_job.delay(check_pk)


def run_reward_check(check_pk: int) -> RewardCheck | None:
    """Check each task and end the row; None when another attempt holds it or it is done."""
    lease = states.claim(RewardCheck, check_pk, stale_after=stale_after(), started_at=timezone.now())
    if lease is None:
        return None
    check = RewardCheck.objects.select_related("suite").get(pk=check_pk)
    blind: list[str] = []
    try:
        spec = active_spec()
        tasks = checkable_tasks(check.suite)
        states.write(lease, total=len(tasks), spec_version=spec.version)
        with states.Heartbeat(lease, stale_after() / 4):
            for done, task in enumerate(tasks, start=1):
                if not check_reward_sanity(task, spec).separates:
                    blind.append(task.task_id)
                states.write(lease, done=done, blind=blind)
    except states.Superseded:
        logger.warning("reward check %s: attempt %d was superseded; it stops", check_pk, lease.attempt)
        return None
    except (RewardError, TaskStoreError) as exc:
        logger.warning("reward check %s failed: %s", check_pk, exc)
        states.end(lease, states.FAILED, check, error=str(exc)[:2000], blind=blind, finished_at=timezone.now())
        return check
    states.end(lease, states.SUCCEEDED, check, blind=blind, finished_at=timezone.now())
    logger.info("reward check %s of %s: %d blind of %d", check_pk, check.suite.name, len(blind), len(tasks))
    return check
