"""The batch page's model figures: generation speed and per-step model time, from the steps' records.

Read from Step.extra["model"] (trajectories.schema.ModelCall), which the hf and openai policies
write for every step; a batch of another policy has none, and the partial says nothing.
"""

from __future__ import annotations

import statistics
from typing import Any, TypedDict

from django import template

from trajectories.models import RolloutBatch, Step
from trajectories.schema import MODEL_CALL

register = template.Library()


class ModelSpeed(TypedDict):
    steps: int
    tokens_per_s: float | None  # all completion tokens over all generation time
    median_step_tokens_per_s: float | None
    mean_model_ms: float
    median_model_ms: float
    max_model_ms: float
    mean_prompt_tokens: float | None
    mean_completion_tokens: float | None


def batch_model_speed(batch: RolloutBatch) -> ModelSpeed | None:
    rows = Step.objects.filter(trajectory__batch=batch, extra__has_key=MODEL_CALL).values_list(
        f"extra__{MODEL_CALL}__generate_ms",
        f"extra__{MODEL_CALL}__completion_tokens",
        f"extra__{MODEL_CALL}__prompt_tokens",
        f"extra__{MODEL_CALL}__tokens_per_s",
    )
    times, completions, prompts, rates = [], [], [], []
    for generate_ms, completion, prompt, rate in rows:
        if not isinstance(generate_ms, (int, float)):
            continue
        times.append(float(generate_ms))
        if isinstance(completion, int):
            completions.append((completion, float(generate_ms)))
        if isinstance(prompt, int):
            prompts.append(prompt)
        if isinstance(rate, (int, float)):
            rates.append(float(rate))
    if not times:
        return None
    generated_s = sum(ms for _, ms in completions) / 1000
    return {
        "steps": len(times),
        "tokens_per_s": round(sum(n for n, _ in completions) / generated_s, 1) if generated_s > 0 else None,
        "median_step_tokens_per_s": round(statistics.median(rates), 1) if rates else None,
        "mean_model_ms": round(statistics.fmean(times), 1),
        "median_model_ms": round(statistics.median(times), 1),
        "max_model_ms": round(max(times), 1),
        "mean_prompt_tokens": round(statistics.fmean(prompts), 1) if prompts else None,
        "mean_completion_tokens": round(statistics.fmean(n for n, _ in completions), 1) if completions else None,
    }


@register.inclusion_tag("trajectories/_model_speed.html")
def model_speed(batch: RolloutBatch) -> dict[str, Any]:
    return {"speed": batch_model_speed(batch), "batch": batch}
