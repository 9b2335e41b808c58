"""Several training runs side by side: each metric's curves overlaid, and what their configs differ in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from training.models import RunMetric, TrainingRun
from training.run_queries import MetricGroup, metric_groups

MAX_RUNS = 8  # curves one chart can still tell apart
STEPS_PER_RUN = 2000  # the latest logged steps of each run
MAX_IDS_TEXT = 200


class CompareError(ValueError):
    pass


@dataclass
class Overlay:
    runs: list[TrainingRun]
    groups: list[MetricGroup]  # the run page's groups, of every metric some run logged
    series: dict[str, list[dict[str, Any]]]  # metric -> a trace per run that logged it
    config_diff: list[tuple[str, list[str]]]  # dotted key -> each run's value as text, where they differ


def parse_run_ids(values: list[str]) -> list[int]:
    """Run ids from ?runs=1,2 or repeated ?run=1&run=2, in the order given, each once."""
    text = ",".join(values)
    if len(text) > MAX_IDS_TEXT:
        raise CompareError(f"too many run ids: overlay at most {MAX_RUNS} runs")
    ids: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if not part.isdigit():
            raise CompareError(f"runs: {part[:20]!r} is not a run id (give ids such as ?runs=3,7)")
        if int(part) not in ids:
            ids.append(int(part))
    if not 2 <= len(ids) <= MAX_RUNS:
        raise CompareError(f"runs: choose from 2 to {MAX_RUNS} runs to overlay (ids such as ?runs=3,7)")
    return ids


def overlay(ids: list[int]) -> Overlay:
    found = TrainingRun.objects.in_bulk(ids)
    missing = [str(i) for i in ids if i not in found]
    if missing:
        raise CompareError(f"runs: no training run {', '.join(missing)}")
    runs = [found[i] for i in ids]
    series: dict[str, list[dict[str, Any]]] = {}
    rows = []
    for run in runs:
        latest = RunMetric.objects.filter(run=run).order_by("-step", "-id").values_list("step", "values")
        steps = list(reversed(latest[:STEPS_PER_RUN]))
        rows += [{"values": values} for _, values in steps]
        for name in sorted({key for _, values in steps for key in values}):
            points = [(step, values[name]) for step, values in steps if name in values]
            trace = {"name": f"#{run.pk} {run.name}"[:80], "x": [s for s, _ in points], "y": [v for _, v in points]}
            series.setdefault(name, []).append(trace)
    return Overlay(runs, metric_groups(rows), series, config_diff([run.config for run in runs]))


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out |= _flat(inner, f"{prefix}.{key}" if prefix else str(key))
        return out
    return {prefix: value}


def config_diff(configs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The dotted keys whose values are not the same in every config ("–" where one lacks it)."""
    flat = [_flat(config or {}) for config in configs]
    keys = sorted({key for one in flat for key in one})
    rows = []
    for key in keys:
        shown = [str(one[key]) if key in one else "–" for one in flat]
        if len(set(shown)) > 1:
            rows.append((key, shown))
    return rows
