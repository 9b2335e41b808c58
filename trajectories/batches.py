"""Verbs for rollout batches: start one, find and enqueue what is left, resume, cancel."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import states
from core.audit import AuditAction, record
from core.limits import (
    MAX_NEW_TOKENS_DEFAULT,
    MAX_NEW_TOKENS_MAX,
    MAX_NEW_TOKENS_MIN,
    MAX_STEPS_DEFAULT,
    MAX_STEPS_MAX,
    MAX_STEPS_MIN,
    SAMPLES_MAX,
    SAMPLES_MIN,
    TEMPERATURE_DEFAULT,
    TEMPERATURE_MAX,
    TEMPERATURE_MIN,
)
from core.live import publish_on_commit
from core.vocabulary import DEFAULT_BACKEND, ISOLATING_BACKENDS, LAUNCHABLE_POLICIES, PolicyKind
from tasks.models import TaskSuite
from trajectories.events import BatchStatusEvent, batch_live_group
from trajectories.jobs import run_trajectory_job
from trajectories.models import RolloutBatch, Trajectory
from trajectories.policies.base import PolicyError
from trajectories.policies.openai import check_server
from trajectories.policies.registry import policy_registry
from trajectories.progress import stale_running

logger = logging.getLogger(__name__)

ROLLOUT_NS = uuid.UUID("1d3f5a40-8c1b-4f6e-9a2d-5b7c3e9f0a11")
SETTINGS_RANGES = (
    f"samples {SAMPLES_MIN}-{SAMPLES_MAX}, max steps {MAX_STEPS_MIN}-{MAX_STEPS_MAX}, "
    f"temperature {TEMPERATURE_MIN:g}-{TEMPERATURE_MAX:g}, top_p in (0, 1], "
    f"max new tokens {MAX_NEW_TOKENS_MIN}-{MAX_NEW_TOKENS_MAX}"
)


class RolloutError(ValueError):
    pass


def rollout_id(batch: RolloutBatch, task_id: str, sample: int) -> uuid.UUID:
    return uuid.uuid5(ROLLOUT_NS, f"{batch.pk}:{task_id}:{sample}")


def check_batch_settings(
    policy_kind: str,
    *,
    samples: int,
    temperature: float,
    top_p: float,
    max_steps: int,
    sandbox: str,
    base_url: str,
    max_new_tokens: int,
) -> None:
    if policy_kind not in LAUNCHABLE_POLICIES:
        raise RolloutError(f"policy must be one of {', '.join(LAUNCHABLE_POLICIES)}")
    if policy_kind == PolicyKind.OPENAI:
        try:
            # Refused here, before anything is queued, as well as in the worker.
            check_server(base_url)
        except PolicyError as exc:
            raise RolloutError(str(exc)) from None
    if not (
        SAMPLES_MIN <= samples <= SAMPLES_MAX
        and MAX_STEPS_MIN <= max_steps <= MAX_STEPS_MAX
        and TEMPERATURE_MIN <= temperature <= TEMPERATURE_MAX
        and 0 < top_p <= 1
        and MAX_NEW_TOKENS_MIN <= max_new_tokens <= MAX_NEW_TOKENS_MAX
    ):
        raise RolloutError(SETTINGS_RANGES)
    if sandbox not in ISOLATING_BACKENDS:
        raise RolloutError(f"sandbox must be {' or '.join(ISOLATING_BACKENDS)}")


@transaction.atomic
def start_batch(
    suite: TaskSuite,
    policy_kind: str,
    model: str = "",
    *,
    samples: int = 1,
    temperature: float = TEMPERATURE_DEFAULT,
    top_p: float = 1.0,
    max_steps: int = MAX_STEPS_DEFAULT,
    sandbox: str = DEFAULT_BACKEND,
    seed: int = 0,
    base_url: str = "",
    max_new_tokens: int = MAX_NEW_TOKENS_DEFAULT,
    user: Any = None,
    enqueue: bool = True,
    task_ids: list[str] | None = None,
) -> RolloutBatch:
    """A batch over the suite's tasks, or only over `task_ids` of it (one try need not cost a suite)."""
    check_batch_settings(
        policy_kind,
        samples=samples,
        temperature=temperature,
        top_p=top_p,
        max_steps=max_steps,
        sandbox=sandbox,
        base_url=base_url,
        max_new_tokens=max_new_tokens,
    )
    tasks = list(suite.tasks.order_by("task_id"))
    if not tasks:
        raise RolloutError(f"suite {suite.name} has no tasks")
    if task_ids:
        wanted = set(task_ids)
        missing = sorted(wanted - {t.task_id for t in tasks})
        if missing:
            raise RolloutError(f"suite {suite.name} has no task {', '.join(repr(m[:80]) for m in missing[:5])}")
        tasks = [t for t in tasks if t.task_id in wanted]
    if policy_kind == PolicyKind.SCRIPTED and any(not t.expected_patch.strip() for t in tasks):
        raise RolloutError("the scripted policy needs every task to have an expected patch")
    batch = RolloutBatch.objects.create(
        suite=suite,
        policy_kind=policy_kind,
        model=model or default_model(policy_kind),
        base_url=base_url,
        samples=samples,
        temperature=temperature,
        top_p=top_p,
        max_steps=max_steps,
        sandbox=sandbox,
        seed=seed,
        max_new_tokens=max_new_tokens,
        created_by=user if getattr(user, "pk", None) else None,
    )
    now = timezone.now()
    Trajectory.objects.bulk_create(
        [
            Trajectory(
                trajectory_id=rollout_id(batch, t.task_id, i),
                batch=batch,
                sample_index=i,
                task=t,
                suite=suite,
                task_ref=t.task_id,
                task_version=t.version,
                base_commit=t.base_commit,
                status=Trajectory.Status.QUEUED,
                source=Trajectory.Source.ONLINE,
                created_at=now,
            )
            for t in tasks
            for i in range(samples)
        ]
    )
    # After the rows it describes: without a transaction around the caller, a failed insert
    # leaves no launch on record.
    record(user, AuditAction.LAUNCH, batch, kind="batch", suite=suite.name, policy=policy_kind, model=batch.model)
    logger.info(
        "batch %s created: suite %s, policy %s (%s), %d trajectories",
        batch.pk,
        suite.name,
        policy_kind,
        batch.model,
        len(tasks) * samples,
    )
    if enqueue:
        transaction.on_commit(lambda: enqueue_missing(batch))
    return batch


def check_policy_source(policy_kind: str, model: str, base_url: str, timeout: float = 3.0) -> None:
    """Is the model there? Asked before a batch is queued, so a typo is an error on the form,
    not a batch of failed trajectories (the policy registry's preflight for the kind)."""
    problem = policy_registry.preflight(
        policy_kind, model or default_model(policy_kind), base_url=base_url, timeout=timeout
    )
    if problem:
        raise RolloutError(problem)


def default_model(policy_kind: str) -> str:
    if policy_kind == PolicyKind.SCRIPTED:
        return "oracle"
    if policy_kind == PolicyKind.HF:
        return str(settings.CRUCIBLE_DEFAULT_MODEL)
    return ""


def pending(batch: RolloutBatch, stale_after: float | None = None) -> list[Trajectory]:
    """Trajectories still to run: queued, failed, cancelled, or running with a dead heartbeat.

    Nothing of a cancelled batch is pending: it stays cancelled until a person resumes it.
    """
    if batch.status == RolloutBatch.Status.CANCELLED:
        return []
    waiting = Q(status__in=[Trajectory.Status.QUEUED, Trajectory.Status.FAILED, Trajectory.Status.CANCELLED])
    if stale_after is not None:
        waiting |= stale_running(stale_after)
    return list(batch.trajectories.filter(waiting).order_by("id"))


def enqueue_missing(batch: RolloutBatch, stale_after: float | None = None) -> int:
    todo = pending(batch, stale_after)
    for trajectory in todo:
        run_trajectory_job.delay(trajectory.pk, stale_after)
    logger.info("batch %s: %d trajectories enqueued", batch.pk, len(todo))
    return len(todo)


def requeue_lost_rollouts() -> int:
    """Enqueue again the queued rollouts of unfinished batches: after a Redis restart lost the queue.

    Called by a worker that reconnected to an empty `rollouts` queue (webapp.celery). Another
    worker doing the same at the same moment costs a claim each, never a second run.
    """
    waiting = Trajectory.objects.filter(
        status=Trajectory.Status.QUEUED,
        batch__status__in=[RolloutBatch.Status.QUEUED, RolloutBatch.Status.RUNNING],
    )
    count = 0
    for pk in waiting.order_by("id").values_list("pk", flat=True).iterator():
        run_trajectory_job.delay(pk)
        count += 1
    if count:
        logger.warning("%d queued rollouts were not in the broker's queue (Redis restarted?); enqueued again", count)
    return count


def requeue_dead_rollouts(stale_after: float) -> int:
    """Put back in the queue the rollouts whose worker died mid-run: running, no heartbeat for `stale_after` s.

    A worker killed outright (SIGKILL, the OOM killer, a lost host) leaves its trajectory running
    and its message unacknowledged in Redis for the broker's visibility timeout (an hour), and a
    redelivered message cannot take a running row: without this the batch never ends. The row
    goes back to queued, so the batch cannot close meanwhile and the normal claim takes it. The
    conditional UPDATE is the lock: of two workers checking at once, one moves and enqueues a row.
    """
    dead = Trajectory.objects.filter(
        stale_running(stale_after), batch__status__in=[RolloutBatch.Status.QUEUED, RolloutBatch.Status.RUNNING]
    )
    count = 0
    for pk in list(dead.values_list("pk", flat=True)):
        # Outside the usual moves (running -> queued), like claim's running -> running: the worker is gone.
        if Trajectory.objects.filter(Q(pk=pk) & stale_running(stale_after)).update(status=Trajectory.Status.QUEUED):
            run_trajectory_job.delay(pk)
            count += 1
    if count:
        logger.warning("%d rollouts had no heartbeat for %g s (their worker died); enqueued again", count, stale_after)
    return count


def resume_batch(batch: RolloutBatch, stale_after: float = 120.0, user: Any = None) -> int:
    """Re-run only what is missing; a trajectory already finished is never run twice.

    A person's resume is the one way out of cancelled (core.states.reopen). A batch with
    nothing left to run keeps the state it has.
    """
    with transaction.atomic():
        todo = Q(status__in=states.REOPENABLE) | stale_running(stale_after) | Q(status=Trajectory.Status.QUEUED)
        if not batch.trajectories.filter(todo).exists():
            return 0
        states.reopen(batch.trajectories.all())
        RolloutBatch.objects.filter(pk=batch.pk).exclude(status=RolloutBatch.Status.QUEUED).update(
            status=RolloutBatch.Status.QUEUED, finished_at=None
        )
        record(user, AuditAction.RESUME, batch, kind="batch")
    batch.refresh_from_db(fields=["status", "finished_at"])
    return enqueue_missing(batch, stale_after)


def cancel_batch(batch: RolloutBatch, user: Any = None) -> bool:
    """Stop a batch: queued trajectories never run; running ones stop at once (trajectories.runner
    watches for this). False when the batch had already ended."""
    with transaction.atomic():
        if not states.transition(batch, states.CANCELLED, finished_at=timezone.now()):
            return False
        left = states.transition_all(batch.trajectories.filter(status=Trajectory.Status.QUEUED), states.CANCELLED)
        record(user, AuditAction.CANCEL, batch, kind="batch", queued_left=left)
        event: BatchStatusEvent = {"kind": "status", "status": RolloutBatch.Status.CANCELLED}
        publish_on_commit(batch_live_group(batch.pk), event)
    logger.info("batch %s cancelled; %d queued trajectories will not run", batch.pk, left)
    return True


def launch_from_form(data: dict[str, Any], user: Any) -> RolloutBatch:
    """start_batch with a LaunchForm's cleaned data: the batch page and the API launch alike."""
    return start_batch(
        data["suite"],
        data["policy"],
        data["model"],
        samples=data["samples"],
        temperature=data["temperature"],
        max_steps=data["max_steps"],
        sandbox=data["sandbox"],
        base_url=data["base_url"],
        user=user,
        task_ids=data["tasks"],
    )
