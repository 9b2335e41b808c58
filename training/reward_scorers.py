"""Reward-model checkpoints as pair scorers: does a trained reward model prefer what people prefer?

The agreement report (annotation.agreement_report) asks its scorer providers afresh on every
report, so a reward model saved after start-up is compared with people as soon as it exists —
the seed's "calibrate against people regularly", per checkpoint and over time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import partial
from pathlib import Path
from typing import Any

from annotation.agreement_report import PairScorer
from annotation.models import Comparison
from core.vocabulary import CheckpointKind
from training.checkpoint_store import CheckpointStoreError, is_fetchable, local_checkpoint
from training.models import Checkpoint
from trajectories.conversation import TOOLS, RecordedStep, judged_conversation
from trajectories.models import Trajectory

# The newest few reward models: each one loaded is a model in this process's memory.
MAX_MODELS = 3
MAX_TOKENS = 2048  # as a reward trainer's max_length: what the model was trained to read
MAX_CACHED_SCORES = 20_000

_lock = threading.Lock()
_models: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
_scores: OrderedDict[tuple[int, int], float] = OrderedDict()


def reward_model_scorers() -> dict[str, PairScorer]:
    scorers: dict[str, PairScorer] = {}
    newest = Checkpoint.objects.filter(kind=CheckpointKind.REWARD).order_by("-created_at", "-id")[:MAX_MODELS]
    for checkpoint in newest:
        # One saved on another host is listed when the object store has it; scoring fetches it.
        if (Path(checkpoint.path) / "config.json").is_file() or is_fetchable(checkpoint):
            scorers[f"reward model {checkpoint.name} (#{checkpoint.pk})"] = partial(
                score_difference, checkpoint.pk, checkpoint.path
            )
    return scorers


def learned_score(checkpoint_ref: str, trajectory: Trajectory) -> float:
    """A reward spec's learned component: the named reward-model checkpoint's score of a trajectory.

    `checkpoint_ref` is a checkpoint's id or name (the newest of that name). A missing or
    unloadable reward model fails the scoring rather than quietly leaving the component out.
    """
    from rewards.learned import LearnedScoreError

    found = Checkpoint.objects.filter(kind=CheckpointKind.REWARD)
    found = found.filter(pk=int(checkpoint_ref)) if checkpoint_ref.isdigit() else found.filter(name=checkpoint_ref)
    checkpoint = found.order_by("-created_at", "-id").first()
    if checkpoint is None:
        raise LearnedScoreError(f"no reward-model checkpoint {checkpoint_ref!r}")
    try:
        local = local_checkpoint(checkpoint)  # fetched from the object store when saved elsewhere
    except CheckpointStoreError as exc:
        raise LearnedScoreError(f"reward-model checkpoint {checkpoint_ref!r}: {exc}") from None
    if not (local / "config.json").is_file():
        raise LearnedScoreError(f"reward-model checkpoint {checkpoint_ref!r}: no model at {checkpoint.path}")
    return trajectory_score(checkpoint.pk, str(local), trajectory)


def score_difference(checkpoint_id: int, path: str, comparison: Comparison) -> float:
    """The reward model's score of side A minus side B (positive: it prefers A)."""
    return trajectory_score(checkpoint_id, path, comparison.trajectory_a) - trajectory_score(
        checkpoint_id, path, comparison.trajectory_b
    )


def trajectory_score(checkpoint_id: int, path: str, trajectory: Trajectory) -> float:
    key = (checkpoint_id, trajectory.pk)
    with _lock:
        if key in _scores:
            _scores.move_to_end(key)
            return _scores[key]
    import torch

    from training.trainers.sft import plain_message  # torch and transformers: only when scoring

    if not Path(path).is_dir():
        path = str(local_checkpoint(Checkpoint.objects.get(pk=checkpoint_id)))
    tokenizer, model = _load(path)
    statement = trajectory.task.statement if trajectory.task is not None else trajectory.prompt
    steps = [
        RecordedStep(a, i, t or "", o or "")
        for a, i, t, o in trajectory.steps.order_by("step").values_list(
            "action_type", "action_input", "thought", "observation"
        )
    ]
    # The same rendering the reward trainer saw: the policy's chat and the patch it submitted, with the tool schemas.
    messages = [plain_message(m) for m in judged_conversation(statement, steps, trajectory.patch, trajectory.language)]
    text = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False)
    inputs = tokenizer(text, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
    with torch.inference_mode():
        score = float(model(**inputs).logits[0, 0])
    with _lock:
        _scores[key] = score
        while len(_scores) > MAX_CACHED_SCORES:
            _scores.popitem(last=False)
    return score


def _load(path: str) -> tuple[Any, Any]:
    with _lock:
        if path in _models:
            _models.move_to_end(path)
            return _models[path]
    from transformers import AutoModelForSequenceClassification

    from training.trainers.common import load_tokenizer

    tokenizer = load_tokenizer(Path(path))
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    model.config.pad_token_id = tokenizer.pad_token_id
    with _lock:
        _models[path] = (tokenizer, model)
        while len(_models) > MAX_MODELS:
            _models.popitem(last=False)
    return tokenizer, model
