"""Streaming export of trajectories as JSONL, in constant memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from django.db.models import QuerySet

from trajectories.models import Step, Trajectory
from trajectories.schema import record_bytes

EXPORT_CHUNK = 200
TRAJECTORY_COLUMNS = (
    "id", "schema_version", "trajectory_id", "task_ref", "task_version", "base_commit", "prompt", "policy",
    "sandbox", "patch", "final_reward", "success", "termination", "flags", "source", "created_at", "extra",
)
STEP_COLUMNS = (
    "trajectory_id", "step", "action_type", "action_input", "observation", "observation_truncated", "thought",
    "reward", "reward_breakdown", "timestamp", "duration_ms", "exit_code", "extra",
)


def iter_trajectory_lines(queryset: QuerySet[Trajectory] | None = None) -> Iterator[bytes]:
    """JSONL lines for the trajectories, walked by primary key in chunks.

    Keyset paging (id > last) keeps each query cheap however far in we are, and only
    one chunk of trajectories and their steps is in memory at a time.
    """
    qs = (queryset if queryset is not None else Trajectory.objects.all()).order_by("id")
    last = 0
    while True:
        chunk = list(qs.filter(id__gt=last).values(*TRAJECTORY_COLUMNS)[:EXPORT_CHUNK])
        if not chunk:
            return
        last = chunk[-1]["id"]
        by_trajectory: dict[int, list[dict[str, object]]] = {row["id"]: [] for row in chunk}
        steps = Step.objects.filter(trajectory_id__in=list(by_trajectory)).order_by("trajectory_id", "step")
        for step in steps.values(*STEP_COLUMNS).iterator(chunk_size=5000):
            by_trajectory[step["trajectory_id"]].append(step)
        for row in chunk:
            yield record_bytes(row, by_trajectory[row["id"]])


def export_trajectories(out: IO[bytes], queryset: QuerySet[Trajectory] | None = None) -> int:
    count = 0
    for line in iter_trajectory_lines(queryset):
        out.write(line)
        count += 1
    return count
