"""Read helpers for training runs, shared by the run pages and the API."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from core.vocabulary import TrainingKind
from training.models import Checkpoint, RunMetric, TrainingRun

RUN_ROWS = 200
# The run page draws at most this many logged steps; a longer run's chart is its latest part.
METRIC_PAGE = 5000
# GRPO learns from reward differences within a group: this many logged steps in a row with none is said.
FLAT_REWARD_STEPS = 3
FLAT = 1e-9
# A latest step where at least this share of generations reached max_new_tokens is said.
CLIPPED_SHARE = 0.5


def runs() -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related("created_by")[:RUN_ROWS]


def metric_rows(run: TrainingRun, after: int | None = None) -> list[dict[str, Any]]:
    """The latest page of logged steps, or (after=N) the steps after N in order: a page catching up."""
    rows = RunMetric.objects.filter(run=run)
    if after is None:
        latest = rows.order_by("-step", "-id").values_list("step", "values")[:METRIC_PAGE]
        return [{"step": step, "values": values} for step, values in reversed(latest)]
    later = rows.filter(step__gt=after).order_by("step", "id").values_list("step", "values")[:METRIC_PAGE]
    return [{"step": step, "values": values} for step, values in later]


def run_checkpoints(run: TrainingRun) -> QuerySet[Checkpoint]:
    return run.checkpoints.select_related("parent").order_by("step", "id")


def run_notices(run: TrainingRun, rows: list[dict[str, Any]]) -> list[str]:
    """What the run page says about a run's logged steps that the curves alone leave unsaid."""
    if run.kind != TrainingKind.GRPO or not rows:
        return []
    notices = []
    flat: list[int] = []  # the steps of the latest stretch of zero reward variance
    for row in rows:
        std = row["values"].get("reward_std")
        if isinstance(std, int | float):
            flat = [*flat, row["step"]] if abs(std) <= FLAT else []
    if len(flat) >= FLAT_REWARD_STEPS:
        notices.append(
            f"reward_std was 0 for {len(flat)} consecutive logged steps (steps {flat[0]}–{flat[-1]}): every "
            "generation of a group got the same reward, so GRPO had no difference to learn from. Raise "
            "rl.num_generations or rl.temperature, raise rl.max_new_tokens if clipped_ratio is high, or train on "
            "tasks the policy solves some of the time."
        )
    clipped = rows[-1]["values"].get("clipped_ratio")
    if isinstance(clipped, int | float) and clipped >= CLIPPED_SHARE:
        limit = run.config.get("rl", {}).get("max_new_tokens")
        notices.append(
            f"{clipped:.0%} of the latest step's generations reached rl.max_new_tokens ({limit}) and were cut "
            "before they ended (a cut diff scores as no fix): raise rl.max_new_tokens."
        )
    return notices
