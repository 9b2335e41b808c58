"""Verbs for rollout batches: start one, find and enqueue what is left, resume, cancel."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import states
from core.audit import AuditAction, record
from core.live import publish_on_commit
from core.vocabulary import PolicyKind
from tasks.models import TaskSuite
from trajectories.events import BatchStatusEvent, batch_live_group
from trajectories.jobs import run_trajectory_job
from trajectories.models import RolloutBatch, Step, Trajectory
from trajectories.policies.base import PolicyError
from trajectories.policies.openai import check_server
from trajectories.policies.registry import policy_registry
from trajectories.progress import stale_after, stale_running
from trajectories.rollout_settings import RolloutError, RolloutSettings

logger = logging.getLogger(__name__)

ROLLOUT_NS = uuid.UUID("1d3f5a40-8c1b-4f6e-9a2d-5b7c3e9f0a11")


def rollout_id(batch: RolloutBatch, task_id: str, sample: int) -> uuid.UUID:
    return uuid.uuid5(ROLLOUT_NS, f"{batch.pk}:{task_id}:{sample}")


def check_source(rollout: RolloutSettings) -> None:
    """Is the policy's server there? Asked before anything is queued, as well as in the worker."""
    if rollout.policy_kind == PolicyKind.OPENAI:
        try:
            check_server(rollout.base_url)
        except PolicyError as exc:
            raise RolloutError(str(exc)) from None


@transaction.atomic
def start_batch(
    suite: TaskSuite,
    rollout: RolloutSettings,
    *,
    user: Any = None,
    enqueue: bool = True,
    task_ids: list[str] | None = None,
) -> RolloutBatch:
    """A batch over the suite's tasks, or only over `task_ids` of it (one try need not cost a suite)."""
    check_source(rollout)
    rollout = rollout.resolved()
    tasks = list(suite.tasks.order_by("task_id"))
    if not tasks:
        raise RolloutError(f"suite {suite.name} has no tasks")
    if task_ids:
        wanted = set(task_ids)
        missing = sorted(wanted - {t.task_id for t in tasks})
        if missing:
            raise RolloutError(f"suite {suite.name} has no task {', '.join(repr(m[:80]) for m in missing[:5])}")
        tasks = [t for t in tasks if t.task_id in wanted]
    if rollout.policy_kind == PolicyKind.SCRIPTED and any(not t.expected_patch.strip() for t in tasks):
        raise RolloutError("the scripted policy needs every task to have an expected patch")
    batch = RolloutBatch.objects.create(
        suite=suite,
        **rollout.fields(),
        created_by=user if getattr(user, "pk", None) else None,
        # Not enqueued: whoever created it (the `rollout` command) runs its rows itself.
        driver=RolloutBatch.Driver.WORKERS if enqueue else RolloutBatch.Driver.COMMAND,
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
            for i in range(rollout.samples)
        ]
    )
    # After the rows it describes: without a transaction around the caller, a failed insert
    # leaves no launch on record.
    record(
        user, AuditAction.LAUNCH, batch, kind="batch", suite=suite.name, policy=rollout.policy_kind, model=batch.model
    )
    logger.info(
        "batch %s created: suite %s, policy %s (%s), %d trajectories",
        batch.pk,
        suite.name,
        rollout.policy_kind,
        batch.model,
        len(tasks) * rollout.samples,
    )
    if enqueue:
        transaction.on_commit(lambda: enqueue_missing(batch))
    return batch


def check_policy_source(rollout: RolloutSettings, timeout: float = 3.0) -> None:
    """Is the model there? Asked before a batch is queued, so a typo is an error on the form,
    not a batch of failed trajectories (the policy registry's preflight for the kind)."""
    resolved = rollout.resolved()
    problem = policy_registry.preflight(
        resolved.policy_kind, resolved.model, base_url=resolved.base_url, timeout=timeout
    )
    if problem:
        raise RolloutError(problem)


def pending(batch: RolloutBatch) -> list[Trajectory]:
    """Trajectories still to run: queued, failed, cancelled, or running with stopped beats.

    Nothing of a cancelled batch is pending: it stays cancelled until a person resumes it.
    """
    if batch.status == RolloutBatch.Status.CANCELLED:
        return []
    waiting = Q(status__in=[Trajectory.Status.QUEUED, Trajectory.Status.FAILED, Trajectory.Status.CANCELLED])
    return list(batch.trajectories.filter(waiting | stale_running()).order_by("id"))


def enqueue_missing(batch: RolloutBatch) -> int:
    todo = pending(batch)
    for trajectory in todo:
        run_trajectory_job.delay(trajectory.pk)
    logger.info("batch %s: %d trajectories enqueued", batch.pk, len(todo))
    return len(todo)


def worker_batches() -> Q:
    """Unfinished batches whose rollouts run on the workers (a `rollout` command runs its own queued rows)."""
    return Q(batch__status__in=[RolloutBatch.Status.QUEUED, RolloutBatch.Status.RUNNING]) & Q(
        batch__driver=RolloutBatch.Driver.WORKERS
    )


def requeue_lost_rollouts(in_broker: set[int] | None = None, older_than: float = 0.0) -> int:
    """Enqueue again the queued rollouts of unfinished batches that the broker lost (a Redis restart).

    `in_broker` are the trajectory rows whose job the broker holds (queued or delivered and not
    yet acknowledged); None when that is unknown (a worker that reconnected to an empty queue
    knows it holds none). Rows queued less than `older_than` seconds ago may still be on their
    way in. A message sent twice (two sweeps at once, one prefetched elsewhere) costs a claim,
    never a second run (trajectories.progress.claim).
    """
    waiting = Trajectory.objects.filter(worker_batches(), status=Trajectory.Status.QUEUED)
    if older_than:
        cutoff = timezone.now() - timedelta(seconds=older_than)
        waiting = waiting.filter(Q(heartbeat_at=None) | Q(heartbeat_at__lt=cutoff), created_at__lt=cutoff)
    count = 0
    for pk in waiting.order_by("id").values_list("pk", flat=True).iterator():
        if in_broker is not None and pk in in_broker:
            continue
        run_trajectory_job.delay(pk)
        count += 1
    if count:
        logger.warning("%d queued rollouts were not in the broker's queue (Redis restarted?); enqueued again", count)
    return count


def requeue_dead_rollouts() -> int:
    """Put back in the queue the rollouts whose attempt stopped beating (its worker died or was stopped).

    A worker killed outright (SIGKILL, the OOM killer, a lost host) leaves its trajectory running
    and its message unacknowledged in Redis for the broker's visibility timeout (an hour), and a
    redelivered message cannot take a running row: without this the batch never ends. The row
    goes back to queued, so the batch cannot close meanwhile, and the normal claim takes it
    (core.states.take_back: of two sweeps one moves it; an attempt that beat meanwhile keeps it).
    A stopped `rollout` command's row is taken over the same way, by the workers.
    """
    unfinished = Trajectory.objects.filter(batch__status__in=[RolloutBatch.Status.QUEUED, RolloutBatch.Status.RUNNING])
    moved = states.take_back(unfinished, stale_after())
    # The dead attempt's steps go now, not at the next claim: a page reads "queued, 0 steps", not
    # "queued, 3 steps" of an attempt that will never finish. It is fenced out already.
    # Only while still queued: a claim that got there first (a redelivered job) drops them itself.
    Step.objects.filter(trajectory_id__in=moved, trajectory__status=Trajectory.Status.QUEUED).delete()
    Trajectory.objects.filter(pk__in=moved, status=Trajectory.Status.QUEUED).update(step_count=0)
    for pk in moved:
        run_trajectory_job.delay(pk)
    if moved:
        logger.warning(
            "%d rollouts had no heartbeat for %g s (their worker died); enqueued again", len(moved), stale_after()
        )
    return len(moved)


def resume_batch(batch: RolloutBatch, user: Any = None) -> int:
    """Re-run only what is missing; a trajectory already finished is never run twice.

    A person's resume is the one way out of cancelled (core.states.reopen). A batch with
    nothing left to run keeps the state it has.
    """
    with transaction.atomic():
        todo = Q(status__in=states.REOPENABLE) | stale_running() | Q(status=Trajectory.Status.QUEUED)
        if not batch.trajectories.filter(todo).exists():
            return 0
        states.reopen(batch.trajectories.all())
        RolloutBatch.objects.filter(pk=batch.pk).exclude(status=RolloutBatch.Status.QUEUED).update(
            status=RolloutBatch.Status.QUEUED, finished_at=None
        )
        # Resumed from a page or the API, it runs on the workers, whoever started it.
        RolloutBatch.objects.filter(pk=batch.pk).update(driver=RolloutBatch.Driver.WORKERS)
        record(user, AuditAction.RESUME, batch, kind="batch")
    batch.refresh_from_db(fields=["status", "finished_at", "driver"])
    return enqueue_missing(batch)


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
    return start_batch(data["suite"], data["rollout"], user=user, task_ids=data["tasks"])
