"""Replaying a recorded trajectory in a fresh sandbox: does it observe the same things again?"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, NotRequired, TypedDict

from django.conf import settings
from django.utils import timezone

from core.live import publish_on_commit
from trajectories.agent import run_episode
from trajectories.events import trajectory_live_group
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
    def __init__(self, on_step: Callable[[int], None] | None = None) -> None:
        self.records: list[AgentStep] = []
        self.on_step = on_step

    def step(self, record: AgentStep) -> None:
        self.records.append(record)
        if self.on_step is not None:
            self.on_step(len(self.records))


def replay_trajectory(
    trajectory_id: str, backend: str | None = None, on_step: Callable[[int], None] | None = None
) -> ReplayReport:
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
    work = agent_task(trajectory.task, max_steps=len(recorded) + 1)
    collected = _Collect(on_step)
    run_episode(work, ReplayPolicy([dict(s) for s in recorded], str(trajectory_id)), collected, backend)
    differences: list[Difference] = []
    for old, new in zip(recorded, collected.records, strict=False):
        if TIMING.sub("<t>", old["observation"]) != TIMING.sub("<t>", new["observation"]):
            differences.append(
                {"step": old["step"], "recorded": old["observation"][:SHOWN], "replayed": new["observation"][:SHOWN]}
            )
    same = min(len(recorded), len(collected.records)) - len(differences)
    return ReplayReport(str(trajectory_id), len(recorded), same, differences, backend)


# A replay as background work: the state lives in Trajectory.replay_report, and every change
# is told to the trajectory's live group, so the page shows progress and then the result
# without a reload (static/js/trajectory.js reads these events):
#   {"kind": "replay", "state": "queued" | "running" | "succeeded" | "failed", "done": 3, "steps": 10}
ERROR_SHOWN = 300


class ReplayEvent(TypedDict):
    kind: Literal["replay"]
    state: Literal["queued", "running", "succeeded", "failed"]
    done: int
    steps: int
    reproducible: NotRequired[bool]
    error: NotRequired[str]


def _set_state(trajectory_id: str, report: dict[str, Any]) -> None:
    Trajectory.objects.filter(trajectory_id=trajectory_id).update(replay_report=report)
    event: ReplayEvent = {
        "kind": "replay",
        "state": report["state"],
        "done": report.get("done", 0),
        "steps": report.get("steps", 0),
    }
    if "reproducible" in report:
        event["reproducible"] = report["reproducible"]
    if report.get("error"):
        event["error"] = report["error"]
    publish_on_commit(trajectory_live_group(trajectory_id), event)


def start_replay(trajectory: Trajectory) -> None:
    """Record that a replay is queued (the previous report gives way to it)."""
    if trajectory.task_id is None:
        raise ReplayError(f"task {trajectory.task_ref!r} is not in this database")
    steps = trajectory.step_count
    _set_state(str(trajectory.trajectory_id), {"state": "queued", "done": 0, "steps": steps})


def run_replay(trajectory_id: str, backend: str | None = None) -> dict[str, Any]:
    """Replay with progress on the row and the live group; keep the report (or the error) on the row."""
    steps = Trajectory.objects.filter(trajectory_id=trajectory_id).values_list("step_count", flat=True).first() or 0
    _set_state(trajectory_id, {"state": "running", "done": 0, "steps": steps})

    def progress(done: int) -> None:
        _set_state(trajectory_id, {"state": "running", "done": done, "steps": steps})

    try:
        report = replay_trajectory(trajectory_id, backend, on_step=progress)
    except Exception as exc:
        message = " ".join(str(exc).split())[:ERROR_SHOWN] or type(exc).__name__
        _set_state(
            trajectory_id,
            {"state": "failed", "done": 0, "steps": steps, "error": message, "at": timezone.now().isoformat()},
        )
        raise
    data = {
        **asdict(report),
        "state": "succeeded",
        "done": report.steps,
        "reproducible": report.reproducible,
        "at": timezone.now().isoformat(),
    }
    _set_state(trajectory_id, data)
    return data
