"""Trajectories with a verified outcome, for curation tests that are not about running tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from rewards.models import Reward
from rewards.spec import load_spec
from trajectories.models import Trajectory

SPEC = load_spec()


def record_score(
    trajectory: Trajectory,
    reward: float,
    resolved: bool,
    flags: Sequence[dict[str, Any]] = (),
    spec_version: str = SPEC.version,
) -> Reward:
    """What rewards.services.score_trajectory stores, without the sandbox run that computes it.

    Tests that need the real computation call score_trajectory itself (see test_verified_sets).
    """
    row = Reward.objects.create(
        trajectory=trajectory,
        spec_version=spec_version,
        reward=reward,
        resolved=resolved,
        pass_rate=1.0 if resolved else 0.0,
        flags=list(flags),
    )
    Trajectory.objects.filter(pk=trajectory.pk).update(
        final_reward=reward, success=resolved, flags=list(flags), scored_spec=spec_version, scored_at=timezone.now()
    )
    trajectory.refresh_from_db()
    return row
