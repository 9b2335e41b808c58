"""Live events about trajectories and batches: what the browser hears, and the groups it hears them on.

static/js/trajectory.js reads the events of a trajectory's group, static/js/batch.js those
of a batch's group; a field renamed here must be renamed there.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from core.limits import LIVE_TEXT_MAX
from core.live import group_name
from core.vocabulary import LiveGroup
from trajectories.schema import StepRecord


def trajectory_live_group(trajectory_id: object) -> str:
    return group_name(LiveGroup.TRAJECTORY, trajectory_id)


def batch_live_group(batch_pk: object) -> str:
    return group_name(LiveGroup.BATCH, batch_pk)


class LiveStep(TypedDict):
    step: int
    action_type: str
    action_input: Any
    # Cut to LIVE_TEXT_MAX; the page fetches the whole text from the API when asked.
    observation: str
    thought: str
    exit_code: int | None
    duration_ms: float | None
    timestamp: str | None


class StepsEvent(TypedDict):
    """On a trajectory's group: steps just recorded, in order."""

    kind: Literal["steps"]
    attempt: int  # a page showing a later attempt drops these; an earlier one starts over
    steps: list[LiveStep]


class AttemptEvent(TypedDict):
    """On a trajectory's group: a new attempt took the rollout over; the steps shown so far are gone."""

    kind: Literal["attempt"]
    attempt: int


class FinishedEvent(TypedDict):
    """On a trajectory's group: the rollout ended (finished or cancelled)."""

    kind: Literal["finished"]
    status: str
    termination: str


class BatchCounts(TypedDict):
    total: int
    finished: int
    failed: int
    left: int  # neither finished, failed nor cancelled


class BatchStepEvent(TypedDict):
    """On a batch's group: one of its trajectories recorded a step."""

    kind: Literal["step"]
    trajectory_id: str
    step: int
    attempt: int


class BatchTrajectoryEvent(BatchCounts):
    """On a batch's group: one of its trajectories ended; the batch's counts after it."""

    kind: Literal["trajectory"]
    trajectory_id: str
    status: str
    termination: str
    steps: int
    error: str  # why it failed, cut to trajectories.progress.ERROR_HEAD; "" when it did not
    batch_status: NotRequired[str]  # only when this trajectory was the batch's last


class BatchStatusEvent(TypedDict):
    """On a batch's group: the batch itself changed state (cancelled)."""

    kind: Literal["status"]
    status: str


class BatchRow(TypedDict):
    """One trajectory's row on a batch page, as the resync API gives it."""

    trajectory_id: str
    status: str
    steps: int
    termination: str
    error: str


class BatchState(BatchCounts):
    """What a batch page repaints from after a reconnect: every row and the counts."""

    status: str
    rows: list[BatchRow]
    errors: list[tuple[str, int]]  # distinct errors of failed trajectories, most frequent first


def live_step(row: StepRecord) -> LiveStep:
    stamp = row["timestamp"]
    return {
        "step": row["step"],
        "action_type": row["action_type"],
        "action_input": row["action_input"],
        "observation": row["observation"][:LIVE_TEXT_MAX],
        "thought": row["thought"][:LIVE_TEXT_MAX],
        "exit_code": row["exit_code"],
        "duration_ms": row["duration_ms"],
        "timestamp": stamp.isoformat() if stamp else None,
    }
