"""A batch's progress: claiming its trajectories, counting them, closing the batch when all are done."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from django.db import transaction
from django.db.models import Avg, Count, F, Max, Min, Q
from django.utils import timezone

from core import states
from core.live import publish_on_commit
from trajectories.events import BatchCounts, BatchTrajectoryEvent, batch_live_group
from trajectories.models import RolloutBatch, Step, Trajectory

# A batch page lists at most this many distinct errors, each cut to ERROR_HEAD characters.
DISTINCT_ERRORS_MAX = 10
ERROR_HEAD = 500


class BatchMetrics(BatchCounts):
    trajectories_per_hour: float | None
    avg_sandbox_startup_ms: float | None
    avg_step_latency_ms: float | None
    resolved: int


def stale_running(stale_after: float) -> Q:
    """Running trajectories whose worker stopped beating: it died, so the row is free again."""
    cutoff = timezone.now() - timedelta(seconds=stale_after)
    return Q(status=Trajectory.Status.RUNNING) & (Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at=None))


def claim(trajectory_pk: int, stale_after: float | None = None) -> bool:
    """Take a trajectory for this worker; False when another worker has it or it is done.

    A single UPDATE ... WHERE is the lock: two workers given the same trajectory (a
    redelivered message, a resume) cannot both win. Nothing of a cancelled batch is
    claimed, so a job that wakes up after the cancel runs nothing.
    """
    claimable = Q(status__in=states.sources(states.RUNNING))
    if stale_after is not None:
        # A dead worker's row: running -> running under a new attempt, outside the usual moves.
        claimable |= stale_running(stale_after)
    # Cancelled by a cancel that a resume has since undone (the resume reopened the batch).
    claimable |= Q(status=Trajectory.Status.CANCELLED)
    claimable &= ~Q(batch__status=RolloutBatch.Status.CANCELLED)
    won = Trajectory.objects.filter(Q(pk=trajectory_pk) & claimable).update(
        status=Trajectory.Status.RUNNING, heartbeat_at=timezone.now(), attempt=F("attempt") + 1
    )
    if won:
        # Steps of an attempt that died half-way are dropped: the new attempt starts clean.
        Step.objects.filter(trajectory_id=trajectory_pk).delete()
        Trajectory.objects.filter(pk=trajectory_pk).update(step_count=0, error="")
    return bool(won)


def mark_batch_running(batch: RolloutBatch) -> None:
    if batch.status == RolloutBatch.Status.QUEUED:
        states.transition(batch, states.RUNNING, only_from=[states.QUEUED], started_at=timezone.now())


def batch_cancelled(batch_pk: int) -> bool:
    return RolloutBatch.objects.filter(pk=batch_pk, status=RolloutBatch.Status.CANCELLED).exists()


def record_trajectory_end(trajectory: Trajectory) -> None:
    """Tell the batch's page, and close the batch when this was its last trajectory."""
    batch = trajectory.batch
    if batch is None:
        return
    counts = batch_counts(batch)
    event: BatchTrajectoryEvent = {
        "kind": "trajectory",
        "trajectory_id": str(trajectory.trajectory_id),
        "status": trajectory.status,
        "termination": trajectory.termination,
        "steps": trajectory.step_count,
        "error": error_line(trajectory.error),
        **counts,
    }
    with transaction.atomic():
        if counts["left"] == 0:
            status = RolloutBatch.Status.FAILED if counts["failed"] else RolloutBatch.Status.SUCCEEDED
            mark_batch_running(batch)
            # Conditional: a cancel that got here first stays; the batch never reads succeeded after it.
            if states.transition(batch, status, finished_at=timezone.now()):
                event["batch_status"] = status
        publish_on_commit(batch_live_group(batch.pk), event)


def batch_counts(batch: RolloutBatch) -> BatchCounts:
    by_status = dict(batch.trajectories.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    total = sum(by_status.values())
    done = by_status.get(Trajectory.Status.FINISHED, 0)
    failed = by_status.get(Trajectory.Status.FAILED, 0)
    return {
        "total": total,
        "finished": done,
        "failed": failed,
        "left": total - done - failed - by_status.get(Trajectory.Status.CANCELLED, 0),
    }


def error_line(error: str) -> str:
    """An error's first line, cut to ERROR_HEAD: what a row or a list of errors shows (the log tail is below it)."""
    return error.strip().split("\n", 1)[0][:ERROR_HEAD]


def distinct_errors(batch: RolloutBatch) -> list[tuple[str, int]]:
    """The batch's failed trajectories' errors, most frequent first: what went wrong, at a glance."""
    failed = batch.trajectories.filter(status=Trajectory.Status.FAILED).exclude(error="")
    counted = Counter(error_line(error) for error in failed.values_list("error", flat=True).iterator())
    return sorted(counted.items(), key=lambda item: (-item[1], item[0]))[:DISTINCT_ERRORS_MAX]


def batch_metrics(batch: RolloutBatch) -> BatchMetrics:
    """Seed §8's three: trajectories per hour, sandbox start-up, step latency."""
    finished = batch.trajectories.filter(status=Trajectory.Status.FINISHED)
    span = finished.aggregate(first=Min("created_at"), last=Max("heartbeat_at"))
    hours = ((span["last"] - batch.started_at).total_seconds() / 3600) if span["last"] and batch.started_at else 0
    startups = [s.get("startup_ms") for s in finished.values_list("sandbox", flat=True) if s and s.get("startup_ms")]
    steps = Step.objects.filter(trajectory__batch=batch).aggregate(avg=Avg("duration_ms"))
    return {
        "trajectories_per_hour": round(finished.count() / hours, 1) if hours > 0 else None,
        "avg_sandbox_startup_ms": round(sum(startups) / len(startups), 1) if startups else None,
        "avg_step_latency_ms": round(steps["avg"], 1) if steps["avg"] is not None else None,
        "resolved": finished.filter(success=True).count(),
        **batch_counts(batch),
    }
