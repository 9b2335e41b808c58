"""Trajectory filters and lookups shared by the pages and the API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import django_filters
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Left, Length

from core.vocabulary import CHEAT_DETECTORS, ActionType
from trajectories.models import Step, Trajectory
from trajectories.sections import steps_query
from trajectories.step_filters import FlagAtStep, StepFilter


def flagged_with(detector: str) -> Q:
    """Trajectories carrying a flag of `detector`: the stored JSON text of a flag, the same on SQLite
    (which has no JSON containment lookup) and PostgreSQL."""
    return Q(flags__icontains=f'"detector": "{detector}"')


class TrajectoryFilter(django_filters.FilterSet):
    suite = django_filters.CharFilter(field_name="suite__name")
    task = django_filters.CharFilter(field_name="task_ref")
    policy = django_filters.CharFilter(field_name="policy_kind")
    model = django_filters.CharFilter(field_name="policy_model")
    success = django_filters.BooleanFilter()
    reward_min = django_filters.NumberFilter(field_name="final_reward", lookup_expr="gte")
    reward_max = django_filters.NumberFilter(field_name="final_reward", lookup_expr="lte")
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    checkpoint = django_filters.CharFilter(field_name="policy__checkpoint")
    batch = django_filters.NumberFilter(field_name="batch_id")
    flag = django_filters.CharFilter(method="filter_flag")
    min_steps = django_filters.NumberFilter(field_name="step_count", lookup_expr="gte")
    max_steps = django_filters.NumberFilter(field_name="step_count", lookup_expr="lte")
    max_duplicate_rate = django_filters.NumberFilter(field_name="duplicate_rate", lookup_expr="lte")
    q = django_filters.CharFilter(method="filter_text")
    # The generations a GRPO run scored as it trained (training.launcher files them with their run).
    training_run = django_filters.NumberFilter(method="filter_training_run")

    class Meta:
        model = Trajectory
        fields = ["suite", "task", "policy", "model", "success", "termination", "source"]

    def filter_flag(self, queryset: QuerySet[Trajectory], name: str, value: str) -> QuerySet[Trajectory]:
        return queryset.filter(flagged_with(value))

    def filter_training_run(self, queryset: QuerySet[Trajectory], name: str, value: Any) -> QuerySet[Trajectory]:
        return queryset.filter(extra__training_run=int(value))

    def filter_text(self, queryset: QuerySet[Trajectory], name: str, value: str) -> QuerySet[Trajectory]:
        """Thoughts and observations: PostgreSQL full-text search, a substring match elsewhere."""
        value = value.strip()[:200]
        if not value:
            return queryset
        matching: QuerySet[Any]
        if connection.vendor == "postgresql":
            matching = Step.objects.annotate(search=SearchVector("thought", "observation", config="simple")).filter(
                search=SearchQuery(value, config="simple")
            )
        else:
            matching = Step.objects.filter(Q(thought__icontains=value) | Q(observation__icontains=value))
        return queryset.filter(id__in=matching.values("trajectory_id"))


def trajectory_list(params: dict[str, str] | None = None) -> tuple[QuerySet[Trajectory], TrajectoryFilter]:
    """The list page's rows. A training run's own generations (thousands, unverified) are filed under
    their run: listed only when asked for (`training_run`), not among the rollouts and imports."""
    base = Trajectory.objects.select_related("suite").defer("prompt", "patch", "policy", "sandbox", "extra")
    if not (params or {}).get("training_run"):
        base = base.exclude(extra__has_key="training_run")
    flt = TrajectoryFilter(params, queryset=base)
    return flt.qs.order_by("-created_at", "-id"), flt


def trajectory_detail(trajectory_id: str) -> Trajectory:
    return Trajectory.objects.select_related("task", "suite").get(trajectory_id=trajectory_id)


# Steps the page renders with itself, its first screenful (a step with a long observation fills
# most of a screen by itself), and steps each further chunk brings as the reader scrolls on:
# more at a time, so that scrolling through short steps is not a request every few lines.
STEP_CHUNK = 10
STEP_MORE = 50
OBSERVATION_HEAD = 2000  # characters shown before "show all"


def step_chunk(
    trajectory: Trajectory,
    *,
    after: int = -1,
    before: int | None = None,
    limit: int = STEP_CHUNK,
    only: StepFilter | None = None,
    flagged: Mapping[int, list[FlagAtStep]] | None = None,
) -> tuple[list[Step], int | None]:
    """Up to `limit` steps numbered above `after` (or the last ones below `before`), in order,
    that `only` matches (`flagged`: flags_at_steps, for its flag filter), and where the next chunk
    in that direction starts (the `after` or `before` to ask with; None where nothing lies beyond).

    A trajectory can hold thousands of steps and megabytes of output; only a chunk of heads
    crosses from the database, observations and thoughts cut there, the rest is fetched when
    someone asks for it. What other apps show on each step (labels) is prefetched by their
    page sections. A filter that reads whole texts reads a window of steps at a time: a chunk
    short of `limit` may end at the window's edge, and the next one searches on from there.
    """
    # The chunk's rows are chosen by id first, the heads cut only for them: asked in one query,
    # PostgreSQL may sort every step of the trajectory by number and cut every observation on
    # the way (a new trajectory's steps are not in its statistics yet), 23 ms at 1,000 steps.
    ids = trajectory.steps.values("id")
    window = None
    if only is not None and only.active:
        ids = only.narrow(ids, flagged or {})
        window = only.window
    if before is not None:
        edge = max(before - window, 0) if window else None
        ids = ids.filter(step__lt=before).order_by("-step")
        if edge is not None:
            ids = ids.filter(step__gte=edge)
    else:
        edge = after + window if window else None
        ids = ids.filter(step__gt=after).order_by("step")
        if edge is not None:
            ids = ids.filter(step__lte=edge)
    heads = Step.objects.filter(id__in=ids[: limit + 1]).order_by("step")
    heads = heads.defer("observation", "thought").annotate(
        obs_head=Left("observation", OBSERVATION_HEAD),
        obs_len=Length("observation"),
        thought_head=Left("thought", OBSERVATION_HEAD),
        thought_len=Length("thought"),
    )
    rows = list(steps_query(heads))
    if len(rows) > limit:
        rows = rows[-limit:] if before is not None else rows[:limit]
        return rows, (rows[0].step if before is not None else rows[-1].step)
    if edge is None:
        return rows, None
    beyond = trajectory.steps.filter(step__lt=edge) if before is not None else trajectory.steps.filter(step__gt=edge)
    return rows, (edge if beyond.exists() else None)


# Steps a flag naming a file is shown at: one whose file changed a thousand times is not a list
# of a thousand badges' worth of rows to read for every chunk.
TIED_STEPS_MAX = 200
CHANGES_FILES = (ActionType.WRITE_FILE, ActionType.EDIT_FILE)


def _flag_at(flag: dict[str, Any], *, by_path: bool) -> FlagAtStep:
    line = flag.get("line")
    return FlagAtStep(
        detector=str(flag.get("detector", "")),
        evidence=str(flag.get("evidence", "")),
        path=str(flag.get("path") or ""),
        line=line if isinstance(line, int) and not isinstance(line, bool) else None,
        cheat=flag.get("detector") in CHEAT_DETECTORS,
        by_path=by_path,
    )


def flags_at_steps(trajectory: Trajectory) -> dict[int, list[FlagAtStep]]:
    """The verified flags each step earned, by step number.

    A flag the scorer recorded with a step (process findings, git history mined) is that
    step's. One that names only a file of the final patch (a protected path edited, an
    `__eq__` overridden) is shown at each write_file or edit_file step that changed that file
    (by the path as the agent wrote it, or with a leading "./"); a file changed by a shell
    command is tied to no step. One query, and only when a flag names a file without a step.
    """
    at: dict[int, list[FlagAtStep]] = {}
    by_path: dict[str, list[dict[str, Any]]] = {}
    for flag in trajectory.flags:
        if not isinstance(flag, dict):
            continue
        step, path = flag.get("step"), flag.get("path")
        if isinstance(step, int) and not isinstance(step, bool):
            at.setdefault(step, []).append(_flag_at(flag, by_path=False))
        elif isinstance(path, str) and path:
            by_path.setdefault(path, []).append(flag)
    if by_path:
        spelled = {name: path for path in by_path for name in (path, f"./{path}")}
        changes = (
            trajectory.steps.filter(action_type__in=CHANGES_FILES, action_input__path__in=list(spelled))
            .order_by("step")
            .values_list("step", "action_input__path")[:TIED_STEPS_MAX]
        )
        for step, name in changes:
            for flag in by_path.get(spelled.get(name, ""), []):
                at.setdefault(step, []).append(_flag_at(flag, by_path=True))
    return at


def step_timeline(trajectory: Trajectory) -> list[tuple[int, str, float | None]]:
    """(step, action type, reward) for every step: the scrubber above the steps."""
    return list(trajectory.steps.order_by("step").values_list("step", "action_type", "reward"))


def neighbours(trajectory: Trajectory) -> tuple[str | None, str | None]:
    """The trajectories before and after this one in the list's order (newest first).

    Each side is a range on the list's index with the ties at this one's timestamp taken out,
    not an OR of two ranges: an OR is answered by collecting both ranges and sorting them,
    which over 100k newer trajectories cost 35 ms, where the range stops at its first row.
    """
    at, pk = trajectory.created_at, trajectory.pk
    newer = Trajectory.objects.filter(created_at__gte=at).exclude(created_at=at, id__lte=pk)
    older = Trajectory.objects.filter(created_at__lte=at).exclude(created_at=at, id__gte=pk)
    prev_id = newer.order_by("created_at", "id").values_list("trajectory_id", flat=True).first()
    next_id = older.order_by("-created_at", "-id").values_list("trajectory_id", flat=True).first()
    return (str(prev_id) if prev_id else None, str(next_id) if next_id else None)
