"""The trajectory page's reward parts: the stored score, its per-test results, and "score again"."""

from __future__ import annotations

from typing import Any

from rewards.models import Reward, ScoringFailure
from trajectories.models import Trajectory
from trajectories.sections import Slot, TrajectorySection, register_trajectory_section


def latest_reward(trajectory: Trajectory) -> dict[str, Any]:
    return {
        "score": Reward.objects.filter(trajectory=trajectory).order_by("-created_at").first(),
        # Why the last scoring failed, while nothing has scored it since: the page offers a retry.
        "scoring_failure": None
        if trajectory.scored_at
        else ScoringFailure.objects.filter(trajectory=trajectory).order_by("-updated_at").first(),
    }


def register() -> None:
    register_trajectory_section(
        TrajectorySection(
            key="rewards",
            templates={
                Slot.OUTCOME: "rewards/_trajectory_outcome.html",
                Slot.ACTIONS: "rewards/_trajectory_rescore.html",
                Slot.AFTER_STEPS: "rewards/_trajectory_scoring.html",
            },
            load=latest_reward,
        )
    )
