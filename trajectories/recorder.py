"""Where a rollout's steps go as the agent takes them: the database, then the browser."""

from __future__ import annotations

import time
from typing import Any

from core import states
from core.live import publish_on_commit
from trajectories.bulk import insert_steps, step_row
from trajectories.events import BatchStepEvent, LiveStep, StepsEvent, batch_live_group, live_step, trajectory_live_group
from trajectories.models import Trajectory
from trajectories.schema import HARNESS_TESTS, MODEL_CALL, AgentStep, StepRecord

LIVE_FLUSH_S = 0.05  # steps from fast policies go out together, at most this often


class DBRecorder:
    """Each step committed on its own, then sent live; a crash loses at most one step.

    Every write is fenced by the attempt's lease (core.states.write): an attempt that was
    superseded gets Superseded at its next step, and neither that step nor anything it still
    had to send live goes anywhere.
    """

    def __init__(self, trajectory: Trajectory, lease: states.Lease) -> None:
        self.trajectory = trajectory
        self.lease = lease
        self.group = trajectory_live_group(trajectory.trajectory_id)
        self.buffer: list[LiveStep] = []
        self.last_flush = 0.0

    def step(self, record: AgentStep) -> None:
        extra: dict[str, Any] = {"policy_ms": record["policy_ms"]}
        if "harness_tests" in record:
            extra[HARNESS_TESTS] = record["harness_tests"]
        if "model" in record:
            extra[MODEL_CALL] = record["model"]
        row: StepRecord = {
            "step": record["step"],
            "action_type": record["action_type"],
            "action_input": record["action_input"],
            "observation": record["observation"],
            "observation_truncated": record["observation_truncated"],
            "thought": record["thought"],
            "timestamp": record["timestamp"],
            "duration_ms": record["duration_ms"],
            "exit_code": record["exit_code"],
            "reward": None,
            "reward_breakdown": {},
            "extra": extra,
        }
        try:
            states.write(
                self.lease, lambda: insert_steps([step_row(self.trajectory.pk, row)]), step_count=record["step"]
            )
        except states.Superseded:
            self.buffer = []
            raise
        self.buffer.append(live_step(row))
        if time.monotonic() - self.last_flush >= LIVE_FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            steps, self.buffer = self.buffer, []
            # Outside a transaction (a worker) this sends at once; inside one, after it.
            event: StepsEvent = {"kind": "steps", "attempt": self.lease.attempt, "steps": steps}
            publish_on_commit(self.group, event)
            if self.trajectory.batch_id:
                progress: BatchStepEvent = {
                    "kind": "step",
                    "trajectory_id": str(self.trajectory.trajectory_id),
                    "step": steps[-1]["step"],
                    "attempt": self.lease.attempt,
                }
                publish_on_commit(batch_live_group(self.trajectory.batch_id), progress)
        self.last_flush = time.monotonic()
