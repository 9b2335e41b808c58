"""REST for rollout batches: list, read, launch (the batch page's form), cancel and resume.

Launching goes through trajectories.batch_views.LaunchForm, the form of the batch page, so a
batch the API accepts is exactly one the page would: same limits, same check that the
policy's model or server is there before anything is queued.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_filters import CreatedRangeFilterSet
from core.api_schema import ProblemSerializer
from core.limits import MAX_STEPS_MAX, MAX_STEPS_MIN, SAMPLES_MAX, SAMPLES_MIN, TEMPERATURE_MAX, TEMPERATURE_MIN
from core.vocabulary import ISOLATING_BACKENDS, LAUNCHABLE_POLICIES, RunStatus, choices
from tasks.models import TaskSuite
from trajectories.batch_views import LaunchForm
from trajectories.batches import cancel_batch, launch_from_form, resume_batch
from trajectories.models import RolloutBatch
from trajectories.progress import batch_counts
from trajectories.rollout_settings import RolloutError

BATCH_EXAMPLE = {
    "id": 42,
    "suite": "demo",
    "policy_kind": "hf",
    "model": "smollm2-135m-instruct",
    "base_url": "",
    "samples": 4,
    "temperature": 0.8,
    "top_p": 1.0,
    "max_steps": 30,
    "max_new_tokens": 256,
    "sandbox": "bwrap",
    "seed": 0,
    "status": "running",
    "created_by": "rita-researcher",
    "created_at": "2026-11-02T09:00:00Z",
    "started_at": "2026-11-02T09:00:02Z",
    "finished_at": None,
}
COUNTS_EXAMPLE = {"total": 48, "finished": 20, "failed": 1, "left": 27}


class BatchConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "batch_conflict"
    default_detail = "The batch cannot do that in its present state."


@extend_schema_serializer(examples=[OpenApiExample("batch", value=BATCH_EXAMPLE, response_only=True)])
class BatchSerializer(serializers.ModelSerializer[RolloutBatch]):
    suite: serializers.SlugRelatedField[TaskSuite] = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)  # type: ignore[var-annotated]

    class Meta:
        model = RolloutBatch
        fields = list(BATCH_EXAMPLE)
        read_only_fields = fields


class CountsSerializer(serializers.Serializer[dict[str, int]]):
    total = serializers.IntegerField()
    finished = serializers.IntegerField()
    failed = serializers.IntegerField()
    left = serializers.IntegerField(help_text="neither finished, failed nor cancelled")


@extend_schema_serializer(
    examples=[OpenApiExample("batch", value={**BATCH_EXAMPLE, "counts": COUNTS_EXAMPLE}, response_only=True)]
)
class BatchDetailSerializer(BatchSerializer):
    counts = serializers.SerializerMethodField()

    class Meta(BatchSerializer.Meta):
        fields = [*BatchSerializer.Meta.fields, "counts"]
        read_only_fields = fields

    @extend_schema_field(CountsSerializer)
    def get_counts(self, batch: RolloutBatch) -> dict[str, int]:
        counts = batch_counts(batch)
        return {key: int(value) for key, value in counts.items()}  # type: ignore[call-overload]


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "four samples of two tasks",
            value={"suite": "demo", "policy": "hf", "samples": 4, "tasks": ["task_0001", "task_0002"]},
            request_only=True,
        )
    ]
)
class BatchLaunchSerializer(serializers.Serializer[dict[str, Any]]):
    """What POST takes; the batch page's LaunchForm validates it, defaults as on the page."""

    suite = serializers.CharField(help_text="the suite's name")
    policy = serializers.ChoiceField(choices=[p.value for p in LAUNCHABLE_POLICIES])
    model = serializers.CharField(required=False, help_text="model dir (hf) or model name (openai)")
    base_url = serializers.CharField(required=False, help_text="OpenAI-compatible server (openai)")
    samples = serializers.IntegerField(required=False, min_value=SAMPLES_MIN, max_value=SAMPLES_MAX, default=1)
    temperature = serializers.FloatField(required=False, min_value=TEMPERATURE_MIN, max_value=TEMPERATURE_MAX)
    max_steps = serializers.IntegerField(required=False, min_value=MAX_STEPS_MIN, max_value=MAX_STEPS_MAX)
    sandbox = serializers.ChoiceField(choices=[b.value for b in ISOLATING_BACKENDS], required=False)
    tasks = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="task ids (default: every task of the suite)"
    )


class BatchFilter(CreatedRangeFilterSet):
    suite = django_filters.CharFilter(field_name="suite__name")
    status = django_filters.ChoiceFilter(choices=choices(RunStatus))
    policy = django_filters.CharFilter(field_name="policy_kind")

    class Meta:
        model = RolloutBatch
        fields = ["suite", "status", "policy", "model", "sandbox"]


def _form_data(data: Any) -> dict[str, Any]:
    """The JSON body as the page's form fields: defaults filled in, the task list as its text."""
    if not isinstance(data, dict):
        raise ValidationError({"non_field_errors": ["send a JSON object"]})
    initial = {name: field.initial for name, field in LaunchForm.base_fields.items() if field.initial is not None}
    # The deployment's backend, as the page preselects it.
    initial["sandbox"] = settings.CRUCIBLE_SANDBOX_BACKEND
    fields = {**initial, **{k: v for k, v in data.items() if k in LaunchForm.base_fields}}
    tasks = fields.get("tasks")
    if isinstance(tasks, list):
        fields["tasks"] = ",".join(str(t) for t in tasks)
    return fields


def form_errors(errors: Any) -> dict[str, list[str]]:
    return {("non_field_errors" if k == "__all__" else k): [str(e) for e in v] for k, v in errors.items()}


class BatchViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[RolloutBatch]):
    """Rollout batches: a suite x samples x policy; researchers launch, cancel and resume them."""

    filterset_class = BatchFilter
    lookup_value_converter = "int"

    def get_queryset(self) -> QuerySet[RolloutBatch]:
        return RolloutBatch.objects.select_related("suite", "created_by")

    def get_serializer_class(self) -> Any:
        return BatchSerializer if self.action == "list" else BatchDetailSerializer

    @extend_schema(request=BatchLaunchSerializer, responses={201: BatchDetailSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Launch a batch, as the batch page's form does."""
        form = LaunchForm(_form_data(request.data))
        if not form.is_valid():
            raise ValidationError(form_errors(form.errors))
        data = form.cleaned_data
        try:
            batch = launch_from_form(data, request.user)
        except RolloutError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(BatchDetailSerializer(batch).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: BatchDetailSerializer, 409: ProblemSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Stop the batch: queued trajectories never run, running ones stop. 409 when it had ended."""
        batch = self.get_object()
        if not cancel_batch(batch, request.user):
            raise BatchConflict(f"batch {batch.pk} has already ended ({batch.status})")
        batch.refresh_from_db()
        return Response(BatchDetailSerializer(batch).data)

    @extend_schema(request=None, responses={200: BatchDetailSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        """Run again what is missing (never a finished trajectory twice); nothing left is not an error."""
        batch = self.get_object()
        resume_batch(batch, user=request.user)
        batch.refresh_from_db()
        return Response(BatchDetailSerializer(batch).data)
