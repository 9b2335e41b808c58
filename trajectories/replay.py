"""Replaying a recorded trajectory in a fresh sandbox: does it observe the same things again?"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypedDict

from django.conf import settings

from trajectories.agent import run_episode
from trajectories.models import Trajectory
from trajectories.policies.replay import ReplayPolicy
from trajectories.runner import agent_task
from trajectories.schema import AgentStep

# What legitimately differs between two runs of the same action: timings and the
# per-run report path the test runner is given.
TIMING = re.compile(r"\bin \d+(\.\d+)?s\b|\d+(\.\d+)? ?ms\b|/run/[0-9a-f]{32}")
SHOWN = 2000  # characters of each differing observation kept in the report


class ReplayError(ValueError):
    pass


class Difference(TypedDict):
    step: int
    recorded: str
    replayed: str


@dataclass
class ReplayReport:
    trajectory_id: str
    steps: int
    same: int
    differences: list[Difference]
    backend: str

    @property
    def reproducible(self) -> bool:
        return not self.differences


class _Collect:
    def __init__(self) -> None:
        self.records: list[AgentStep] = []

    def step(self, record: AgentStep) -> None:
        self.records.append(record)


def replay_trajectory(trajectory_id: str, backend: str | None = None) -> ReplayReport:
    """Run a recorded trajectory's actions again in a fresh sandbox: same observations?

    Timings ("3 passed in 0.05s") and report paths are ignored; everything else
    must match, or the difference is reported step by step.
    """
    backend = backend or settings.CRUCIBLE_SANDBOX_BACKEND
    trajectory = Trajectory.objects.select_related("task").get(trajectory_id=trajectory_id)
    if trajectory.task is None:
        raise ReplayError(f"task {trajectory.task_ref!r} is not in this database")
    recorded = list(
        trajectory.steps.order_by("step").values("step", "action_type", "action_input", "observation", "thought")
    )
    spec = agent_task(trajectory.task, max_steps=len(recorded) + 1)
    collected = _Collect()
    run_episode(spec, ReplayPolicy([dict(s) for s in recorded], str(trajectory_id)), collected, backend)
    differences: list[Difference] = []
    for old, new in zip(recorded, collected.records, strict=False):
        if TIMING.sub("<t>", old["observation"]) != TIMING.sub("<t>", new["observation"]):
            differences.append(
                {"step": old["step"], "recorded": old["observation"][:SHOWN], "replayed": new["observation"][:SHOWN]}
            )
    same = min(len(recorded), len(collected.records)) - len(differences)
    return ReplayReport(str(trajectory_id), len(recorded), same, differences, backend)
