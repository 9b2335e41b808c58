"""REST: list and read eval runs; researchers launch them (POST /api/v1/eval-runs/)."""

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
from core.limits import MAX_STEPS_MAX, MAX_STEPS_MIN
from core.vocabulary import LAUNCHABLE_POLICIES, RunStatus, choices
from evaluation.forms import EvalRunForm
from evaluation.models import EvalRun
from evaluation.queries import eval_runs
from evaluation.services import EvalError, refresh_eval

EVAL_EXAMPLE = {
    "id": 3,
    "suite": "demo-test",
    "policy_kind": "hf",
    "model": "smollm2-135m-instruct",
    "checkpoint": 5,
    "samples": 5,
    "k_values": [1, 5],
    "temperature": 0.8,
    "batch": 43,
    "status": "succeeded",
    "results": {"pass@1": 0.25, "pass@5": 0.5},
    "isolation": {"overlap": 0},
    "forced": False,
    "warning": "",
    "error": "",
    "created_at": "2026-11-02T12:00:00Z",
    "finished_at": "2026-11-02T12:20:00Z",
}


@extend_schema_serializer(examples=[OpenApiExample("eval run", value=EVAL_EXAMPLE, response_only=True)])
class EvalRunSerializer(serializers.ModelSerializer[EvalRun]):
    suite = serializers.CharField(source="suite.name", read_only=True)
    batch = serializers.IntegerField(source="batch_id", read_only=True)
    checkpoint = serializers.IntegerField(source="checkpoint_id", read_only=True)

    class Meta:
        model = EvalRun
        fields = [
            "id",
            "suite",
            "policy_kind",
            "model",
            "checkpoint",
            "samples",
            "k_values",
            "temperature",
            "batch",
            "status",
            "results",
            "isolation",
            "forced",
            "warning",
            "error",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "pass@1 and pass@5 of a checkpoint",
            value={"suite": "demo-test", "checkpoint": 5, "k": "1,5", "samples": 5},
            request_only=True,
        )
    ]
)
class EvalRunLaunchSerializer(serializers.Serializer[dict[str, Any]]):
    """What POST takes (documentation for the schema; evaluation.forms.EvalRunForm validates it)."""

    suite = serializers.CharField()
    policy = serializers.ChoiceField(choices=[p.value for p in LAUNCHABLE_POLICIES], required=False)
    model = serializers.CharField(required=False)
    checkpoint = serializers.IntegerField(required=False, help_text="a policy checkpoint's id; runs as hf")
    base_url = serializers.CharField(required=False)
    k = serializers.CharField(help_text='comma-separated k values, e.g. "1,5"')
    samples = serializers.IntegerField(required=False, help_text="n per task; at least the largest k")
    temperature = serializers.FloatField(required=False)
    max_steps = serializers.IntegerField(
        required=False, min_value=MAX_STEPS_MIN, max_value=MAX_STEPS_MAX, help_text="agent turns per sample"
    )
    force = serializers.BooleanField(required=False, help_text="run despite a train/eval overlap (recorded)")


class EvalRunFilter(CreatedRangeFilterSet):
    suite = django_filters.CharFilter(field_name="suite__name")
    status = django_filters.ChoiceFilter(choices=choices(RunStatus))
    policy = django_filters.CharFilter(field_name="policy_kind")
    checkpoint = django_filters.NumberFilter(field_name="checkpoint_id")

    class Meta:
        model = EvalRun
        fields = ["suite", "status", "policy", "model", "checkpoint"]


class EvalRunViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet[EvalRun]
):
    """Create takes {suite, policy | checkpoint, model, k: "1,5", samples, temperature, max_steps, base_url, force}."""

    serializer_class = EvalRunSerializer
    filterset_class = EvalRunFilter
    lookup_value_converter = "int"

    def get_queryset(self) -> QuerySet[EvalRun]:
        return eval_runs()

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        run = refresh_eval(self.get_object())
        return Response(self.get_serializer(run).data)

    @extend_schema(request=EvalRunLaunchSerializer, responses={201: EvalRunSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not isinstance(request.data, dict):
            raise ValidationError({"non_field_errors": ["send a JSON object"]})
        data = dict(request.data.items())
        if isinstance(data.get("k"), list):
            data["k"] = ",".join(str(k) for k in data["k"])
        form = EvalRunForm(data)
        if not form.is_valid():
            errors = {
                ("non_field_errors" if k == "__all__" else k): [str(e) for e in v] for k, v in form.errors.items()
            }
            raise ValidationError(errors)
        try:
            run = form.launch(request.user)
        except EvalError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(self.get_serializer(run).data, status=status.HTTP_201_CREATED)
