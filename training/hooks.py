"""What training plugs into the layers below it (connected in TrainingConfig.ready)."""

from __future__ import annotations

from annotation.agreement_report import register_scorer_provider
from annotation.pairs import TRAINING_SET, register_source
from rewards.learned import register_learned_scorer
from training.checkpoint_store import CheckpointStoreError, model_is_fetchable, resolve_model
from training.queries import find_training_set
from training.reward_scorers import learned_score, reward_model_scorers
from trajectories.policies.base import PolicyError
from trajectories.policies.registry import ModelSource, policy_registry


def training_set_trajectories(name: str) -> list[str]:
    """The trajectory ids of a training set, `NAME` (newest version) or `NAME@VERSION`."""
    found = find_training_set(name)  # a bad version is a ValueError, which make_pairs reports
    if found is None:
        raise LookupError(f"no training set named {name!r}")
    return [str(trajectory_id) for trajectory_id in found.trajectory_ids]


def fetched_checkpoint(model: str) -> str | None:
    """An hf policy's checkpoint path from another host, as a verified local copy (None: not one)."""
    try:
        return resolve_model(model)
    except CheckpointStoreError as exc:
        raise PolicyError(str(exc)) from None


def connect() -> None:
    # make_pairs --training-set NAME draws pairs from a frozen training set's trajectories.
    register_source(TRAINING_SET, training_set_trajectories)
    # The agreement report compares people with each reward-model checkpoint too.
    register_scorer_provider(reward_model_scorers)
    # A reward spec's `learned:` components are scored by reward-model checkpoints.
    register_learned_scorer(learned_score)
    # An hf rollout on a host without the checkpoint's directory fetches it from the object store.
    policy_registry.add_model_source(ModelSource(fetch=fetched_checkpoint, known=model_is_fetchable))
