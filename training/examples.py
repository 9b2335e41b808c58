"""Example configs the launch form starts from, one per kind (small enough for a CPU).

Each names data that exists where it can: the newest verified training set (sft, grpo; reward and
dpo pair its verified successes with its failures) and, for reward and dpo, the newest comparison
set that has a verdict (people's judgements). Where there is none yet, a placeholder says what
to put there, and the form refuses it by field.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Exists, OuterRef

from annotation.models import ComparisonSet, Judgement
from core.vocabulary import TrainingKind
from training.models import TrainingSet

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
_GRPO = "  num_generations: 2\nenvironment:\n  mode: single_turn  # or agent\n"
PLACEHOLDER_SET = "my-verified-set"
# A side of a long trajectory is thousands of tokens, and a CPU step over it minutes: the examples
# train on what people judged, the patches.
PAIR_SIDES = "pair_sides: patch  # each side its submitted patch; turns: its steps, then the patch"


def _data(kind: TrainingKind, training_set: str, comparison_set: str) -> str:
    set_line = f"training_set: {training_set or PLACEHOLDER_SET}"
    if kind in (TrainingKind.SFT, TrainingKind.GRPO):
        what = "its verified successes" if kind is TrainingKind.SFT else "one prompt per task"
        return f"{set_line}  # a verified training set (name or name@version): {what}"
    if comparison_set:
        data = f"comparison_set: {comparison_set}  # people's verdicts, frozen when the run starts"
    else:
        data = f"{set_line}  # pairs of its verified outcomes; or comparison_set: NAME (people's verdicts)"
    return data + f"\n  {PAIR_SIDES}"


def example(kind: TrainingKind, training_set: str = "", comparison_set: str = "") -> str:
    return _TEMPLATE.format(
        kind=kind.value,
        model=settings.CRUCIBLE_DEFAULT_MODEL,
        batch=2,
        extra=_GRPO if kind is TrainingKind.GRPO else "",
        data=_data(kind, training_set, comparison_set),
    )


def example_data() -> tuple[str, str]:
    """The newest verified training set (name@version) and the newest comparison set with a judgement."""
    verified = [s for s in TrainingSet.objects.order_by("-created_at", "-id")[:50] if s.stats.get("verified")]
    judged = (
        ComparisonSet.objects.filter(Exists(Judgement.objects.filter(comparison__comparison_set=OuterRef("pk"))))
        .order_by("-created_at", "-id")
        .values_list("name", flat=True)
        .first()
    )
    return (str(verified[0]) if verified else "", judged or "")


def examples() -> dict[str, str]:
    training_set, comparison_set = example_data()
    return {kind.value: example(kind, training_set, comparison_set) for kind in TrainingKind}
