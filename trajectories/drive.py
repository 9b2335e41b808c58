"""A batch driven from a command's own process (`rollout`, `evaluate`), beside any workers.

The command runs the batch's waiting rows one after another, like one more worker. It claims
only what nobody holds (trajectories.progress.claim): a row a worker took over, because this
process was stopped for longer than the stale window, stays that worker's, and the command
waits for it to end instead of running it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from core.vocabulary import TrajectoryStatus
from trajectories.batches import pending
from trajectories.models import RolloutBatch
from trajectories.runner import run_trajectory

WAIT_POLL_S = 0.5


def drive_batch(
    batch: RolloutBatch,
    *,
    interrupted: Callable[[], bool] = lambda: False,
    on_progress: Callable[[int, int], None] = lambda done, elsewhere: None,
    run: Callable[[int], object | None] = run_trajectory,
) -> bool:
    """Run what is left of the batch here and wait for what runs elsewhere; False when interrupted.

    Each waiting row is run here at most once per call: a rollout that fails here is not retried
    in a loop (running the command again retries it). A row this process could not claim, or lost
    half-way, is another attempt's; should that one stop beating too, it is claimed again here.
    `on_progress(done, running_elsewhere)` is told after each row and while waiting; `run` runs one
    row (trajectories.runner.run_trajectory, or the command's Redis-retrying wrapper of it).
    """
    tried: set[int] = set()
    while True:
        todo = [t for t in pending(batch) if t.pk not in tried]
        for trajectory in todo:
            if interrupted():
                return False
            if run(trajectory.pk) is not None:
                tried.add(trajectory.pk)
            on_progress(*_counts(batch))
        done, elsewhere = _counts(batch)
        on_progress(done, elsewhere)
        if not elsewhere and not [t for t in pending(batch) if t.pk not in tried]:
            return True
        if interrupted():
            return False
        if not todo:
            time.sleep(WAIT_POLL_S)


def _counts(batch: RolloutBatch) -> tuple[int, int]:
    rows = batch.trajectories
    done = rows.filter(status__in=[TrajectoryStatus.FINISHED, TrajectoryStatus.FAILED, TrajectoryStatus.CANCELLED])
    return done.count(), rows.filter(status=TrajectoryStatus.RUNNING).count()
