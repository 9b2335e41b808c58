"""Read helpers for the checkpoint page: its lineage, the runs started from it, its rollout batches."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from core.vocabulary import PolicyKind
from training.models import Checkpoint, TrainingRun
from trajectories.models import RolloutBatch

# A lineage longer than this is drawn cut at its oldest end: each hop is a query.
LINEAGE_DEPTH = 50
RELATED_ROWS = 50


@dataclass(frozen=True)
class Lineage:
    """A checkpoint's chain of parents, oldest first, ending with the checkpoint itself."""

    chain: list[Checkpoint]
    base_model: str
    """What the oldest checkpoint of the chain was trained from."""
    cut: bool = False
    """The walk stopped at LINEAGE_DEPTH with parents still above."""
    cycle: bool = False
    """A parent named a checkpoint already in the chain (rows edited by hand can loop)."""


def checkpoint_page_row(checkpoint_id: int) -> QuerySet[Checkpoint]:
    return Checkpoint.objects.select_related("run", "parent").filter(pk=checkpoint_id)


def lineage(checkpoint: Checkpoint, depth: int = LINEAGE_DEPTH) -> Lineage:
    chain = [checkpoint]
    seen = {checkpoint.pk}
    parent_id = checkpoint.parent_id
    while parent_id is not None:
        if parent_id in seen:
            return Lineage(list(reversed(chain)), chain[-1].base_model, cycle=True)
        if len(chain) >= depth:
            return Lineage(list(reversed(chain)), chain[-1].base_model, cut=True)
        parent = Checkpoint.objects.select_related("run").filter(pk=parent_id).first()
        if parent is None:
            break
        chain.append(parent)
        seen.add(parent.pk)
        parent_id = parent.parent_id
    return Lineage(list(reversed(chain)), chain[-1].base_model)


def runs_started_from(checkpoint: Checkpoint) -> QuerySet[TrainingRun]:
    """Resumes and fine-tunes of the checkpoint, newest first."""
    return checkpoint.resumed_by.order_by("-created_at", "-id")[:RELATED_ROWS]


def rollout_batches(checkpoint: Checkpoint) -> QuerySet[RolloutBatch]:
    """Batches rolled out with the checkpoint as the hf policy (its path is the batch's model)."""
    batches = RolloutBatch.objects.filter(policy_kind=PolicyKind.HF, model=checkpoint.path)
    return batches.select_related("suite").order_by("-created_at", "-id")[:RELATED_ROWS]
