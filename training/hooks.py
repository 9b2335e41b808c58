"""What training plugs into the layers below it (connected in TrainingConfig.ready)."""

from __future__ import annotations

from annotation.agreement_report import register_scorer_provider
from annotation.pairs import TRAINING_SET, register_source
from rewards.learned import register_learned_scorer
from training.queries import find_training_set
from training.reward_scorers import learned_score, reward_model_scorers


def training_set_trajectories(name: str) -> list[str]:
    """The trajectory ids of a training set, `NAME` (newest version) or `NAME@VERSION`."""
    found = find_training_set(name)  # a bad version is a ValueError, which make_pairs reports
    if found is None:
        raise LookupError(f"no training set named {name!r}")
    return [str(trajectory_id) for trajectory_id in found.trajectory_ids]


def connect() -> None:
    # make_pairs --training-set NAME draws pairs from a frozen training set's trajectories.
    register_source(TRAINING_SET, training_set_trajectories)
    # The agreement report compares people with each reward-model checkpoint too.
    register_scorer_provider(reward_model_scorers)
    # A reward spec's `learned:` components are scored by reward-model checkpoints.
    register_learned_scorer(learned_score)
