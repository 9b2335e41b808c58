"""REST for training sets: list and read them; researchers freeze a new version from a filter and a rule.

Creating is freezing: training.curation.build_training_set chooses the trajectories by their
verified rewards and stores them as the next version of the name, never changed after; the
form and the page that do the same are training.views.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import django_filters
from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_filters import CreatedRangeFilterSet
from training.curation import CurationError, build_training_set
from training.models import TrainingSet
from training.queries import member_rows, set_spec
from training.views import TrainingSetForm
from trajectories.queries import TrajectoryFilter

SET_EXAMPLE = {
    "id": 4,
    "name": "demo-sft",
    "version": 2,
    "spec_version": "default@3",
    "rule": {"query": {"suite": "demo"}, "successes_only": True, "per_task_limit": 2, "seed": 0},
    "stats": {"trajectories": 18, "successes": 18, "failures": 0, "tasks": 9, "verified": True},
    "created_by": "rita-researcher",
    "created_at": "2026-11-02T10:30:00Z",
}
MEMBER_EXAMPLE = {
    "trajectory_id": "0b6f3f0e-4f0c-5a43-9d3e-0c6d5d1f8a11",
    "task_ref": "task_0001",
    "step_count": 7,
    "duplicate_rate": 0.0,
    "resolved": True,
    "reward": 1.0,
}


class MemberSerializer(serializers.Serializer[dict[str, Any]]):
    trajectory_id = serializers.UUIDField()
    task_ref = serializers.CharField()
    step_count = serializers.IntegerField()
    duplicate_rate = serializers.FloatField()
    resolved = serializers.BooleanField(allow_null=True, help_text="under the set's reward spec")
    reward = serializers.FloatField(allow_null=True, help_text="under the set's reward spec")


@extend_schema_serializer(examples=[OpenApiExample("training set", value=SET_EXAMPLE, response_only=True)])
class TrainingSetSerializer(serializers.ModelSerializer[TrainingSet]):
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(slug_field="username", read_only=True)
    spec_version = serializers.SerializerMethodField()

    class Meta:
        model = TrainingSet
        fields = list(SET_EXAMPLE)
        read_only_fields = fields

    def get_spec_version(self, training_set: TrainingSet) -> str:
        return set_spec(training_set)


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "training set with members",
            value={**SET_EXAMPLE, "trajectory_ids": [MEMBER_EXAMPLE["trajectory_id"]], "members": [MEMBER_EXAMPLE]},
            response_only=True,
        )
    ]
)
class TrainingSetDetailSerializer(TrainingSetSerializer):
    members = serializers.SerializerMethodField()

    class Meta(TrainingSetSerializer.Meta):
        fields = [*TrainingSetSerializer.Meta.fields, "trajectory_ids", "members"]
        read_only_fields = fields

    def get_members(self, training_set: TrainingSet) -> list[dict[str, Any]]:
        # The first training.queries.PAGE_ROWS, with the outcome that chose them; all ids are in trajectory_ids.
        return MemberSerializer(member_rows(training_set), many=True).data  # type: ignore[arg-type,return-value]


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "successes of one suite, two per task",
            value={"name": "demo-sft", "filter": {"suite": "demo"}, "successes_only": True, "per_task_limit": 2},
            request_only=True,
        )
    ]
)
class TrainingSetCreateSerializer(serializers.Serializer[dict[str, Any]]):
    """What POST takes (training.views.TrainingSetForm validates it, as the trajectory list's form)."""

    name = serializers.SlugField(max_length=100, help_text="a new name, or a new version of an existing one")
    filter = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text="trajectory-list filters, as /api/v1/trajectories/ takes them (suite, task, batch, success, ...)",
    )
    successes_only = serializers.BooleanField(required=False)
    max_duplicate_rate = serializers.FloatField(required=False, min_value=0, max_value=1)
    per_task_limit = serializers.IntegerField(required=False, min_value=1)
    require_discrimination = serializers.BooleanField(required=False)
    size = serializers.IntegerField(required=False, min_value=1)
    success_ratio = serializers.FloatField(required=False, min_value=0, max_value=1)
    seed = serializers.IntegerField(required=False)


class TrainingSetFilter(CreatedRangeFilterSet):
    name = django_filters.CharFilter()
    version = django_filters.NumberFilter()

    class Meta:
        model = TrainingSet
        fields = ["name", "version"]


def _form_data(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValidationError({"non_field_errors": ["send a JSON object"]})
    fields = {k: v for k, v in data.items() if k in TrainingSetForm.base_fields and k != "query"}
    query = data.get("filter", {})
    if not isinstance(query, dict):
        raise ValidationError({"filter": ["an object of trajectory-list filters"]})
    unknown = sorted(set(query) - set(TrajectoryFilter.base_filters))
    if unknown:
        raise ValidationError({"filter": [f"not a trajectory filter: {', '.join(map(str, unknown))[:200]}"]})
    fields["query"] = urlencode({k: str(v) for k, v in query.items()})
    return fields


class TrainingSetViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[TrainingSet]):
    """Frozen training sets, each a name and version; creating one freezes the next version."""

    filterset_class = TrainingSetFilter
    lookup_value_converter = "int"

    def get_queryset(self) -> QuerySet[TrainingSet]:
        return TrainingSet.objects.select_related("created_by")

    def get_serializer_class(self) -> Any:
        return TrainingSetSerializer if self.action == "list" else TrainingSetDetailSerializer

    @extend_schema(request=TrainingSetCreateSerializer, responses={201: TrainingSetDetailSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Choose trajectories by the filter and rule, by verified rewards, and freeze them as the next version."""
        form = TrainingSetForm(_form_data(request.data))
        if not form.is_valid():
            raise ValidationError({k: [str(e) for e in v] for k, v in form.errors.items()})
        try:
            training_set = build_training_set(form.cleaned_data["name"], form.rule(), request.user)
        except CurationError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(TrainingSetDetailSerializer(training_set).data, status=status.HTTP_201_CREATED)
