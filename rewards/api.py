"""REST for rewards: each trajectory's reward under each reward spec it was scored under (read-only)."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema_serializer
from rest_framework import serializers, viewsets

from core.api_filters import CreatedRangeFilterSet
from rewards.models import Reward
from trajectories.models import Trajectory

REWARD_EXAMPLE = {
    "id": 7,
    "trajectory": "0b6f3f0e-4f0c-5a43-9d3e-0c6d5d1f8a11",
    "task_id": "task_0001",
    "spec_version": "default@3",
    "reward": 1.0,
    "resolved": True,
    "pass_rate": 1.0,
    "tests": {"fail_to_pass": {"passed": 1, "total": 1}, "pass_to_pass": {"passed": 4, "total": 4}},
    "flags": [],
    "breakdown": {"tests": 1.0, "length_penalty": 0.0},
    "process": [{"step": 3, "reward": 0.1, "breakdown": {"progress": 0.1}}],
    "created_at": "2026-11-02T09:12:00Z",
}


@extend_schema_serializer(examples=[OpenApiExample("reward", value=REWARD_EXAMPLE, response_only=True)])
class RewardSerializer(serializers.ModelSerializer[Reward]):
    trajectory: serializers.SlugRelatedField[Trajectory] = serializers.SlugRelatedField(
        slug_field="trajectory_id", read_only=True
    )
    task_id = serializers.CharField(source="trajectory.task_ref", read_only=True)

    class Meta:
        model = Reward
        fields = list(REWARD_EXAMPLE)


class RewardFilter(CreatedRangeFilterSet):
    trajectory = django_filters.UUIDFilter(field_name="trajectory__trajectory_id")
    spec = django_filters.CharFilter(field_name="spec_version")
    suite = django_filters.CharFilter(field_name="trajectory__suite__name")
    task = django_filters.CharFilter(field_name="trajectory__task_ref")
    batch = django_filters.NumberFilter(field_name="trajectory__batch_id")
    reward_min = django_filters.NumberFilter(field_name="reward", lookup_expr="gte")
    reward_max = django_filters.NumberFilter(field_name="reward", lookup_expr="lte")

    class Meta:
        model = Reward
        fields = ["trajectory", "spec", "suite", "task", "batch", "resolved"]


class RewardViewSet(viewsets.ReadOnlyModelViewSet[Reward]):
    """Verified rewards: per trajectory (?trajectory=) and per reward spec (?spec=)."""

    serializer_class = RewardSerializer
    lookup_value_converter = "int"
    filterset_class = RewardFilter

    def get_queryset(self) -> QuerySet[Reward]:
        return Reward.objects.select_related("trajectory")
