"""Read helpers for training runs, shared by the run pages and the API."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypedDict

from django.db.models import QuerySet

from core.limits import MAX_STEPS_DEFAULT, TEMPERATURE_DEFAULT
from core.vocabulary import DEFAULT_BACKEND, TrainingKind
from training.models import Checkpoint, RunMetric, TrainingRun

RUN_ROWS = 200
# The run page draws at most this many logged steps; a longer run's chart is its latest part.
METRIC_PAGE = 5000
# GRPO learns from reward differences within a group: this many logged steps in a row with none is said.
FLAT_REWARD_STEPS = 3
FLAT = 1e-9
# A latest step where at least this share of generations reached max_new_tokens is said.
CLIPPED_SHARE = 0.5


@dataclass(frozen=True)
class ChartGroup:
    """A kind of metric the run page charts together, under one title."""

    kind: str
    """The group's name in the page (data-chart-group) and in ChartRule."""
    title: str
    """The heading above the group's charts."""
    pattern: str
    """A regular expression searched in a metric's name; the first group whose pattern is found takes the
    metric. Kept to the syntax Python and JavaScript read alike: the page sorts live metrics with it."""


# In the order the page shows them. Names are TRL's and the trainers' own (loss, rewards/<fn>/mean, kl,
# clip_ratio/high_mean, completions/mean_length, num_tokens, train_samples_per_second, learning_rate, ...).
CHART_GROUPS = (
    ChartGroup("loss", "Loss", r"loss"),
    ChartGroup("reward", "Reward", r"reward"),
    ChartGroup("kl", "KL, entropy and policy clipping", r"(^|[^a-z])kl([^a-z]|$)|entropy|clip_ratio"),
    ChartGroup("throughput", "Throughput", r"_per_(second|s|min)$|runtime|num_tokens|flos|step_time"),
    ChartGroup("lengths", "Lengths", r"length|clipped_ratio|truncated"),
    # What the trainer process costs the machine (training.trainers.system).
    ChartGroup("system", "System: CPU, memory, GPU", r"^system_"),
)
OTHER_CHARTS = ChartGroup("other", "Other", r"")


class ChartRule(TypedDict):
    kind: str
    title: str
    pattern: str


class MetricGroup(TypedDict):
    kind: str
    title: str
    metrics: list[str]


def chart_rules() -> list[ChartRule]:
    """The groups in page order, for the script that places metrics first seen live."""
    return [{"kind": g.kind, "title": g.title, "pattern": g.pattern} for g in (*CHART_GROUPS, OTHER_CHARTS)]


def chart_group(metric: str) -> ChartGroup:
    return next((g for g in CHART_GROUPS if re.search(g.pattern, metric.lower())), OTHER_CHARTS)


def metric_groups(rows: list[dict[str, Any]]) -> list[MetricGroup]:
    """The groups that have a metric in rows, in page order, each with its metrics by name."""
    names = sorted({name for row in rows for name in row["values"]})
    groups = []
    for group in (*CHART_GROUPS, OTHER_CHARTS):
        metrics = [name for name in names if chart_group(name) == group]
        if metrics:
            groups.append(MetricGroup(kind=group.kind, title=group.title, metrics=metrics))
    return groups


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


def rollout_defaults() -> dict[str, object]:
    """The settings of a checkpoint's "Roll out with this checkpoint" form (training/_rollout_with.html)."""
    return {"sandbox": DEFAULT_BACKEND.value, "temperature": TEMPERATURE_DEFAULT, "max_steps": MAX_STEPS_DEFAULT}


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
