"""REST for rewards: each trajectory's reward under each reward spec it was scored under (read-only), and bulk
verification (scoring runs)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_filters import CreatedRangeFilterSet
from rewards.bulk import ScoringRunError, start_scoring_run
from rewards.models import Reward, ScoringRun
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


SCORING_RUN_EXAMPLE = {
    "id": 3,
    "filters": {"imported": True},
    "spec_version": "default@3f2a9c1d0b7e",
    "status": "running",
    "total": 10000,
    "done": 2400,
    "scored": 2100,
    "skipped": 290,
    "failed": 10,
    "error": "",
    "created_at": "2026-11-02T09:12:00Z",
    "started_at": "2026-11-02T09:12:01Z",
    "finished_at": None,
}


@extend_schema_serializer(examples=[OpenApiExample("scoring run", value=SCORING_RUN_EXAMPLE, response_only=True)])
class ScoringRunSerializer(serializers.ModelSerializer[ScoringRun]):
    class Meta:
        model = ScoringRun
        fields = list(SCORING_RUN_EXAMPLE)
        read_only_fields = fields


@extend_schema_serializer(
    examples=[
        OpenApiExample("every imported trajectory", value={"filters": {"imported": True}}, request_only=True),
        OpenApiExample(
            "one batch, another spec", value={"filters": {"batch": 42}, "spec": "name: strict\n"}, request_only=True
        ),
    ]
)
class ScoringRequestSerializer(serializers.Serializer[Any]):
    """What to verify: the trajectory list's filters (and `imported`), under the active spec or `spec`."""

    filters = serializers.DictField(
        child=serializers.JSONField(),
        help_text="the trajectory list's filters (suite, batch, task, policy, source, ...) and `imported`; "
        "an empty object means every finished trajectory",
    )
    spec = serializers.CharField(required=False, allow_blank=True, default="", help_text="reward spec YAML")


class ScoringRunViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[ScoringRun]):
    """Bulk verification: trajectories scored through the reward service by a `rewards` worker.

    POST answers 202 with the queued run; its `done`/`total` and counts say how far it is. Idempotent
    per (trajectory, spec version): a second run over the same trajectories scores nothing again.
    """

    serializer_class = ScoringRunSerializer
    lookup_value_converter = "int"

    def get_queryset(self) -> QuerySet[ScoringRun]:
        return ScoringRun.objects.all()

    @extend_schema(request=ScoringRequestSerializer, responses={202: ScoringRunSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        asked = ScoringRequestSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        try:
            run = start_scoring_run(asked.validated_data["filters"], asked.validated_data["spec"], request.user)
        except ScoringRunError as exc:
            raise ValidationError({"filters" if "filter" in str(exc) else "spec": [str(exc)]}) from None
        return Response(ScoringRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
