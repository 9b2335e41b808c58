"""Trajectory filters and lookups shared by the pages and the API."""

from __future__ import annotations

from typing import Any

import django_filters
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Left, Length

from trajectories.models import Step, Trajectory
from trajectories.sections import steps_query


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

    class Meta:
        model = Trajectory
        fields = ["suite", "task", "policy", "model", "success", "termination", "source"]

    def filter_flag(self, queryset: QuerySet[Trajectory], name: str, value: str) -> QuerySet[Trajectory]:
        return queryset.filter(flagged_with(value))

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
    base = Trajectory.objects.select_related("suite").defer("prompt", "patch", "policy", "sandbox", "extra")
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
    trajectory: Trajectory, *, after: int = -1, before: int | None = None, limit: int = STEP_CHUNK
) -> tuple[list[Step], bool]:
    """Up to `limit` steps numbered above `after` (or the last ones below `before`), in order,
    and whether more lie beyond them in that direction.

    A trajectory can hold thousands of steps and megabytes of output; only a chunk of heads
    crosses from the database, observations and thoughts cut there, the rest is fetched when
    someone asks for it. What other apps show on each step (labels) is prefetched by their
    page sections.
    """
    # The chunk's rows are chosen by id first, the heads cut only for them: asked in one query,
    # PostgreSQL may sort every step of the trajectory by number and cut every observation on
    # the way (a new trajectory's steps are not in its statistics yet), 23 ms at 1,000 steps.
    ids = trajectory.steps.values("id")
    if before is not None:
        ids = ids.filter(step__lt=before).order_by("-step")
    else:
        ids = ids.filter(step__gt=after).order_by("step")
    heads = Step.objects.filter(id__in=ids[: limit + 1]).order_by("step")
    heads = heads.defer("observation", "thought").annotate(
        obs_head=Left("observation", OBSERVATION_HEAD),
        obs_len=Length("observation"),
        thought_head=Left("thought", OBSERVATION_HEAD),
        thought_len=Length("thought"),
    )
    rows = list(steps_query(heads))
    more = len(rows) > limit
    return (rows[-limit:] if before is not None else rows[:limit]), more


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
