"""A batch's progress: claiming its trajectories, counting them, closing the batch when all are done."""

from __future__ import annotations

from collections import Counter

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, Max, Min, Q
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


def stale_after() -> float:
    """How long a running rollout may go without a beat before it counts as its worker's death."""
    return float(settings.CRUCIBLE_ROLLOUT_STALE_S)


def stale_running() -> Q:
    """Running trajectories whose attempt stopped beating: its worker died or was stopped."""
    return states.stale(stale_after())


def claim(trajectory_pk: int) -> states.Lease | None:
    """Take a trajectory for a new attempt; None when another attempt holds it (it still beats) or it is done.

    Whoever asks (a worker, the `rollout` command, a resume) takes only rows that are waiting or
    whose attempt stopped beating (core.states.claim). Nothing of a cancelled batch is claimed,
    so a job that wakes up after the cancel runs nothing.
    """
    return states.claim(
        Trajectory,
        trajectory_pk,
        stale_after=stale_after(),
        # Cancelled by a cancel that a resume has since undone (the resume reopened the batch).
        also_from=[states.CANCELLED],
        where=~Q(batch__status=RolloutBatch.Status.CANCELLED),
        on_claim=_start_clean,
    )


def _start_clean(lease: states.Lease) -> None:
    # Steps of an attempt that died half-way are dropped, in the claim's transaction: the new
    # attempt starts clean, and the old one's next write finds itself superseded.
    Step.objects.filter(trajectory_id=lease.pk).delete()
    Trajectory.objects.filter(pk=lease.pk).update(step_count=0, error="")


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
    """A batch's throughput figures (docs/scaling.md): trajectories per hour, sandbox start-up, step latency."""
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
