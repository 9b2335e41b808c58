"""What the deployment's sweep (core.sweep) redoes for the reward service.

Lost scoring is the costly kind of lost work: a finished rollout nobody scores is missing from
every training set, evaluation and JSONL that waits for verified rewards, and nothing else would
ever ask for it again (a scoring message consumed by a worker that died before acknowledging it,
one lost with a Redis restart, one that reached a worker of an older release).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import Exists, OuterRef
from django.utils import timezone

from core import states
from core.sweep import SweepContext, register
from core.vocabulary import TrajectoryStatus
from rewards.bulk import enqueue_scoring_run, stale_after
from rewards.jobs import score_run_job, score_trajectory_job
from rewards.models import ScoringFailure, ScoringRun
from rewards.services import active_spec
from trajectories.models import Trajectory

logger = logging.getLogger(__name__)

UNSCORED_PER_SWEEP = 2000  # a sweep enqueues at most this many; the next one takes the rest


def unscored_rollouts(context: SweepContext) -> int:
    """Finished rollouts left unscored longer than the bound, whose scoring job the broker does not hold.

    One whose scoring failed is left for a person (its page offers a retry): it would fail again.
    """
    held = context.broker.job_args(score_trajectory_job.name)
    if held is None:
        return 0
    queued = {str(args[0]) for args in held if args}
    spec_version = active_spec().version
    cutoff = timezone.now() - timedelta(seconds=context.lost_after)
    failed = ScoringFailure.objects.filter(trajectory=OuterRef("pk"), spec_version=spec_version)
    lost = (
        Trajectory.objects.filter(
            batch__isnull=False, status=TrajectoryStatus.FINISHED, scored_at=None, heartbeat_at__lt=cutoff
        )
        .exclude(Exists(failed))
        .order_by("id")
        .values_list("trajectory_id", flat=True)
    )
    count = 0
    for trajectory_id in lost[:UNSCORED_PER_SWEEP]:
        if str(trajectory_id) in queued:
            continue
        score_trajectory_job.delay(str(trajectory_id))
        count += 1
    if count:
        logger.warning("%d finished rollouts were never scored (their scoring job was lost); enqueued again", count)
    return count


def lost_scoring_runs(context: SweepContext) -> int:
    """Scoring runs whose worker stopped beating, and queued ones whose job the broker lost."""
    moved = states.take_back(ScoringRun.objects.all(), stale_after())
    held = context.broker.job_args(score_run_job.name)
    if held is not None:
        queued = {args[0] for args in held if args}
        cutoff = timezone.now() - timedelta(seconds=context.lost_after)
        waiting = ScoringRun.objects.filter(status=ScoringRun.Status.QUEUED, created_at__lt=cutoff)
        moved += [pk for pk in waiting.values_list("pk", flat=True) if pk not in queued and pk not in moved]
    for pk in moved:
        enqueue_scoring_run(pk)
    return len(moved)


def connect() -> None:
    register("scoring", unscored_rollouts)
    register("scoring-runs", lost_scoring_runs)
