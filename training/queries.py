"""Read helpers for training sets, shared by the pages and the export."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import F, FilteredRelation, Q, QuerySet

from rewards.models import Reward
from training.models import TrainingSet
from trajectories.exports import OutcomeOverride, iter_trajectory_lines
from trajectories.models import Trajectory

# The detail page lists this many members; the export always has them all.
PAGE_ROWS = 500
LIST_ROWS = 200


def training_sets() -> QuerySet[TrainingSet]:
    return TrainingSet.objects.all()[:LIST_ROWS]


def find_training_set(ref: str) -> TrainingSet | None:
    """`NAME` is a set's newest version, `NAME@VERSION` a given one; None when there is none.

    Raises ValueError when VERSION is not a number.
    """
    name, _, version = ref.partition("@")
    sets = TrainingSet.objects.filter(name=name)
    if version:
        if not version.isdigit():
            raise ValueError(f"training set version must be a number, not {version!r}: use NAME or NAME@VERSION")
        sets = sets.filter(version=int(version))
    return sets.order_by("-version").first()


def set_spec(training_set: TrainingSet) -> str:
    """The reward spec whose verified rewards chose the set; "" for sets frozen before there was one."""
    spec = training_set.rule.get("spec_version", "") if isinstance(training_set.rule, dict) else ""
    return spec if isinstance(spec, str) else ""


def member_rows(training_set: TrainingSet) -> list[dict[str, Any]]:
    """The members with the outcome that chose them: the reward under the set's spec."""
    spec = set_spec(training_set)
    members = Trajectory.objects.filter(trajectory_id__in=training_set.trajectory_ids[:PAGE_ROWS])
    columns = ("trajectory_id", "task_ref", "step_count", "duplicate_rate")
    if not spec:
        return list(members.values(*columns, resolved=F("success"), reward=F("final_reward")))
    under_spec = members.annotate(chosen_by=FilteredRelation("rewards", condition=Q(rewards__spec_version=spec)))
    return list(under_spec.values(*columns, resolved=F("chosen_by__resolved"), reward=F("chosen_by__reward")))


def _rewards_under(spec: str) -> OutcomeOverride:
    def outcomes(pks: list[int]) -> dict[int, dict[str, Any]]:
        rows = Reward.objects.filter(trajectory_id__in=pks, spec_version=spec)
        return {
            pk: {"final_reward": reward, "success": resolved, "flags": flags}
            for pk, reward, resolved, flags in rows.values_list("trajectory_id", "reward", "resolved", "flags")
        }

    return outcomes


def export_lines(training_set: TrainingSet) -> Iterator[bytes]:
    """The set's trajectories as JSONL, in the trajectory schema, streamed.

    A verified set exports the outcome under the spec that chose it, so the file is the same
    however often the trajectories are scored again under other specs.
    """
    spec = set_spec(training_set)
    return iter_trajectory_lines(
        Trajectory.objects.filter(trajectory_id__in=training_set.trajectory_ids),
        outcomes=_rewards_under(spec) if spec else None,
    )


def export_filename(training_set: TrainingSet) -> str:
    return f"{training_set.name}-v{training_set.version}.jsonl"
