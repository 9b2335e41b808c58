"""Trajectory filters and lookups shared by the pages and the API."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from trajectories.models import Trajectory


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

    class Meta:
        model = Trajectory
        fields = ["suite", "task", "policy", "model", "success", "termination", "source"]


def trajectory_list(params: dict[str, str] | None = None) -> tuple[QuerySet[Trajectory], TrajectoryFilter]:
    base = Trajectory.objects.select_related("suite").defer("prompt", "patch", "policy", "sandbox", "extra")
    flt = TrajectoryFilter(params, queryset=base)
    return flt.qs.order_by("-created_at", "-id"), flt


def trajectory_detail(trajectory_id: str) -> Trajectory:
    return Trajectory.objects.select_related("task", "suite").get(trajectory_id=trajectory_id)
