"""Evaluation during training: a run's saved checkpoints evaluated as they come.

A run whose config has an `evaluation` section (training.config: suite, every, k, samples and the
rollout settings) has every `every`-th checkpoint it saves evaluated on that suite, by the rollout
and reward workers, like any evaluation: the same isolation check (a suite that overlaps what the
run trained on is refused, never forced), the same batch, the same pass@k with its interval. The
results fill the run's reward-vs-pass@k chart while it trains, so gaming shows before the run ends.
"""

from __future__ import annotations

from core.vocabulary import CheckpointKind, PolicyKind
from evaluation.services import EvalError, start_eval
from tasks.models import TaskSuite
from training.checkpoint_listeners import on_checkpoint_saved
from training.config import EVALUATION_ROLLOUT
from training.models import Checkpoint
from trajectories.rollout_settings import RolloutError, RolloutSettings

# What the checked section holds for the rollouts: samples and training.config's rollout settings.
SETTINGS = ("samples", *sorted(EVALUATION_ROLLOUT))


def evaluate_saved_checkpoint(checkpoint: Checkpoint) -> str:
    """Start the evaluation of a run's checkpoint its config asks for; a line for the run's log."""
    run = checkpoint.run
    section = run.config.get("evaluation") if run is not None else None
    if run is None or not isinstance(section, dict) or checkpoint.kind != CheckpointKind.POLICY:
        return ""
    saved = run.checkpoints.filter(kind=CheckpointKind.POLICY, id__lte=checkpoint.pk).count()
    if saved % int(section.get("every", 1)):
        return ""
    where = f"checkpoint {checkpoint.pk} (step {checkpoint.step}) not evaluated"
    suite = TaskSuite.objects.filter(name=section.get("suite")).first()
    if suite is None:
        return f"{where}: no task suite named {str(section.get('suite'))[:120]!r}"
    try:
        settings = RolloutSettings(
            PolicyKind.HF, checkpoint.path, **{key: section[key] for key in SETTINGS if key in section}
        )
        evaluation = start_eval(
            suite, settings, k_values=list(section.get("k") or [1]), checkpoint=checkpoint, user=run.created_by
        )
    except (EvalError, RolloutError, TypeError) as exc:
        return f"{where}: {exc}"
    return f"checkpoint {checkpoint.pk} (step {checkpoint.step}): evaluation {evaluation.pk} on {suite.name} started"


def register() -> None:
    on_checkpoint_saved("evaluation", evaluate_saved_checkpoint)
