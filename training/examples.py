"""Example configs the launch form starts from, one per kind (small enough for a CPU)."""

from __future__ import annotations

from django.conf import settings

from core.vocabulary import TrainingKind

_TEMPLATE = """\
kind: {kind}
name: {kind} of the bundled model
model:
  base_model: {model}
rl:
  max_steps: 2
  batch_size: {batch}
  gradient_accumulation_steps: 1
  learning_rate: 1e-5
  kl_coef: 0.05
{extra}data:
  {data}
logging:
  save_every_steps: 2
"""

_DATA = {
    TrainingKind.SFT: "training_set: my-verified-set  # name or name@version of a verified training set",
    TrainingKind.REWARD: "train_file: var/exports/preferences.jsonl  # TRL preference JSONL (or a training_set)",
    TrainingKind.DPO: "train_file: var/exports/preferences.jsonl  # TRL preference JSONL (or a training_set)",
    TrainingKind.GRPO: "training_set: my-verified-set  # one prompt per task of the set",
}
_GRPO = "  num_generations: 2\nenvironment:\n  mode: single_turn  # or agent\n"


def example(kind: TrainingKind) -> str:
    return _TEMPLATE.format(
        kind=kind.value,
        model=settings.CRUCIBLE_DEFAULT_MODEL,
        batch=2,
        extra=_GRPO if kind is TrainingKind.GRPO else "",
        data=_DATA[kind],
    )


def examples() -> dict[str, str]:
    return {kind.value: example(kind) for kind in TrainingKind}
