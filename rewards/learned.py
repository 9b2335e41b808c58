"""Reward-model components of a reward spec: how a learned score may shift a verified reward.

Plain Python. The scorer itself (a trained checkpoint reading the trajectory's chat) lives in
`training`, above this layer, and registers here at start-up (training.hooks).

The rules hold against a policy that learns to please the reward model:
- a learned component is never alone: a spec's learned weights add up to at most 0.5
  (rewards.spec), and each score is squashed with tanh, so the shift is at most that total W;
- it is never applied to a run the verified side judged invalid, or that an anti-cheat policy
  zeroed or made negative: a cheat cannot be bought back with a pleasing transcript;
- it cannot lift an unresolved patch above 1 - W, the lowest a resolved one can fall to,
  so fooling the reward model never pays as much as passing the hidden tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rewards.spec import RewardSpec

# (checkpoint id or name, trajectory) -> the reward model's raw score for the trajectory
LearnedScorer = Callable[[str, Any], float]

_scorer: LearnedScorer | None = None


class LearnedScoreError(RuntimeError):
    """A spec names a reward model that cannot score (missing checkpoint, no scorer)."""


def register_learned_scorer(scorer: LearnedScorer) -> None:
    global _scorer
    _scorer = scorer


def apply_learned(
    spec: RewardSpec, verified: float, resolved: bool, valid: bool, policies: list[str], trajectory: Any
) -> tuple[float, dict[str, Any]]:
    """The reward after the spec's learned components, and the breakdown entry explaining it."""
    if not spec.learned:
        return verified, {}
    total_weight = sum(c.weight for c in spec.learned)
    if not valid or {"zero", "negative"} & set(policies):
        why = "the test run was not valid" if not valid else "an anti-cheat policy decided this reward"
        return verified, {"applied": False, "why": why, "weight": total_weight}
    if _scorer is None:
        raise LearnedScoreError("the spec names reward models but no reward-model scorer is installed")
    components = []
    shift = 0.0
    for component in spec.learned:
        raw = float(_scorer(component.checkpoint, trajectory))
        if not math.isfinite(raw):
            raise LearnedScoreError(f"reward model {component.checkpoint!r} gave a non-finite score")
        contribution = component.weight * math.tanh(raw)
        shift += contribution
        components.append(
            {
                "checkpoint": component.checkpoint,
                "weight": component.weight,
                "raw": round(raw, 6),
                "contribution": round(contribution, 6),
            }
        )
    reward = verified + shift
    ceiling = 1.0 if resolved else max(verified, 1.0 - total_weight)
    floor = min(verified, spec.negative_value)
    reward = min(max(reward, floor), ceiling)
    entry = {
        "applied": True,
        "weight": total_weight,
        "verified": verified,
        "shift": round(reward - verified, 6),
        "components": components,
    }
    return round(reward, 6), entry
