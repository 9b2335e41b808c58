"""A trained policy checkpoint behind an OpenAI-compatible server, for the `openai` policy.

The `hf` policy loads a checkpoint in the rollout worker's own process; serving it instead
lets many workers (or another harness) share one copy, the way a team serves its policy
with vLLM or SGLang on a GPU host. Here it is `transformers serve`, which needs nothing
but the checkpoint directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from core.vocabulary import CheckpointKind
from training.checkpoint_store import CheckpointStoreError, local_checkpoint
from training.models import Checkpoint
from trajectories.model_server import ModelServer, serve_model


class ServeError(ValueError):
    pass


def policy_checkpoint(ref: str) -> Checkpoint:
    """A policy checkpoint by id or name (the newest of that name) whose files exist."""
    ref = ref.strip()
    found = Checkpoint.objects.filter(pk=int(ref)) if ref.isdigit() else Checkpoint.objects.filter(name=ref)
    checkpoint = found.order_by("-created_at", "-id").first()
    if checkpoint is None:
        raise ServeError(f"no checkpoint {ref!r}")
    if checkpoint.kind != CheckpointKind.POLICY:
        raise ServeError(f"checkpoint {ref!r} is a {checkpoint.kind} model; only policy checkpoints generate")
    try:
        local = local_checkpoint(checkpoint)  # fetched from the object store when saved elsewhere
    except CheckpointStoreError as exc:
        raise ServeError(str(exc)) from None
    if not (local / "config.json").is_file():
        raise ServeError(f"checkpoint {ref!r}: no model at {checkpoint.path}")
    return checkpoint


@contextmanager
def serve_checkpoint(checkpoint: Checkpoint, port: int | None = None) -> Iterator[ModelServer]:
    """Serve the checkpoint until the block ends; requests name the model as `server.model`."""
    with serve_model(str(local_checkpoint(checkpoint)), port=port) as server:
        yield server
