"""REST API for training runs and checkpoints: launch, follow, cancel and resume runs."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_filters import CreatedRangeFilterSet
from core.api_schema import ProblemSerializer
from core.vocabulary import CheckpointKind, RunStatus, TrainingKind, choices
from training.config import MAX_CONFIG_BYTES, ConfigError
from training.models import Checkpoint, TrainingRun
from training.run_queries import metric_rows
from training.services import RunError, cancel_run, create_run, fail_lost_runs, last_checkpoint, resume_run

CHECKPOINT_EXAMPLE = {
    "id": 5,
    "name": "sft-demo-step-40",
    "kind": "policy",
    "path": "/var/crucible/runs/12/checkpoint-40",
    "run": 12,
    "parent": None,
    "base_model": "smollm2-135m-instruct",
    "step": 40,
    "config_hash": "5e1f...",
    "dataset": "demo-sft@2",
    "dataset_hash": "a81c...",
    "code_version": "e603500",
    "metrics": {"loss": 0.82},
    "created_at": "2026-11-02T11:00:00Z",
}
RUN_EXAMPLE = {
    "id": 12,
    "name": "sft-demo",
    "kind": "sft",
    "status": "running",
    "config": {"kind": "sft", "model": {"base_model": "smollm2-135m-instruct"}, "data": {"training_set": "demo-sft"}},
    "config_hash": "5e1f...",
    "dataset": "demo-sft@2",
    "dataset_hash": "a81c...",
    "output_dir": "/var/crucible/runs/12",
    "resume_from": None,
    "worker": "host-1:4242",
    "heartbeat_at": "2026-11-02T11:00:30Z",
    "metrics": {"loss": 0.82, "step": 40},
    "error": "",
    "log_tail": "step 40 loss 0.82",
    "checkpoint": {"id": 5, "path": "/var/crucible/runs/12/checkpoint-40"},
    "created_by": "rita-researcher",
    "created_at": "2026-11-02T10:50:00Z",
    "started_at": "2026-11-02T10:50:05Z",
    "finished_at": None,
}


class RunConflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "run_conflict"
    default_detail = "The run cannot do that in its present state."


@extend_schema_serializer(examples=[OpenApiExample("checkpoint", value=CHECKPOINT_EXAMPLE, response_only=True)])
class CheckpointSerializer(serializers.ModelSerializer[Checkpoint]):
    class Meta:
        model = Checkpoint
        fields = [
            "id",
            "name",
            "kind",
            "path",
            "run",
            "parent",
            "base_model",
            "step",
            "config_hash",
            "dataset",
            "dataset_hash",
            "code_version",
            "metrics",
            "created_at",
        ]


class CheckpointRefSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    path = serializers.CharField()


@extend_schema_serializer(examples=[OpenApiExample("run", value=RUN_EXAMPLE, response_only=True)])
class TrainingRunSerializer(serializers.ModelSerializer[TrainingRun]):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)  # type: ignore[var-annotated]
    checkpoint = serializers.SerializerMethodField()

    class Meta:
        model = TrainingRun
        fields = [
            "id",
            "name",
            "kind",
            "status",
            "config",
            "config_hash",
            "dataset",
            "dataset_hash",
            "output_dir",
            "resume_from",
            "worker",
            "heartbeat_at",
            "metrics",
            "error",
            "log_tail",
            "checkpoint",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    @extend_schema_field(CheckpointRefSerializer(allow_null=True))
    def get_checkpoint(self, run: TrainingRun) -> dict[str, Any] | None:
        checkpoint = last_checkpoint(run)
        return {"id": checkpoint.pk, "path": checkpoint.path} if checkpoint else None


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "SFT on a training set",
            value={
                "config": {
                    "kind": "sft",
                    "model": {"base_model": "smollm2-135m-instruct"},
                    "data": {"training_set": "demo-sft"},
                }
            },
            request_only=True,
        )
    ]
)
class LaunchSerializer(serializers.Serializer[Any]):
    config = serializers.JSONField(help_text="the rl_config as a JSON object, or as its YAML/JSON text")


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "two logged steps",
            value={
                "status": "running",
                "metrics": [{"step": 10, "values": {"loss": 1.2}}, {"step": 20, "values": {"loss": 0.9}}],
            },
            response_only=True,
        )
    ]
)
class MetricsSerializer(serializers.Serializer[dict[str, Any]]):
    status = serializers.ChoiceField(choices=choices(RunStatus))
    metrics = serializers.ListField(child=serializers.DictField(), help_text="one object per logged step")


class TrainingRunFilter(CreatedRangeFilterSet):
    kind = django_filters.ChoiceFilter(choices=choices(TrainingKind))
    status = django_filters.ChoiceFilter(choices=choices(RunStatus))
    created_by = django_filters.CharFilter(field_name="created_by__username")

    class Meta:
        model = TrainingRun
        fields = ["kind", "status", "created_by"]


class TrainingRunViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[TrainingRun]):
    """Training runs (SFT, DPO, reward model, GRPO): researchers launch, cancel and resume them."""

    serializer_class = TrainingRunSerializer
    filterset_class = TrainingRunFilter
    lookup_value_converter = "int"

    def get_queryset(self) -> QuerySet[TrainingRun]:
        return TrainingRun.objects.select_related("created_by")

    @extend_schema(request=LaunchSerializer, responses={201: TrainingRunSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Check the rl_config, freeze its data and queue the run."""
        launch = LaunchSerializer(data=request.data)
        launch.is_valid(raise_exception=True)
        config = launch.validated_data["config"]
        if not isinstance(config, str | dict):
            raise ValidationError({"config": "must be an rl_config object or its YAML/JSON text"})
        if isinstance(config, str) and len(config.encode()) > MAX_CONFIG_BYTES:
            raise ValidationError({"config": f"is larger than {MAX_CONFIG_BYTES // 1024} KiB"})
        try:
            run = create_run(config, request.user)
        except ConfigError as exc:
            raise ValidationError(exc.errors) from None
        except RunError as exc:
            raise ValidationError({"data": str(exc)}) from None
        return Response(TrainingRunSerializer(run).data, status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        fail_lost_runs(TrainingRun.objects.filter(pk=self.kwargs["pk"]))
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(request=None, responses={200: TrainingRunSerializer, 409: ProblemSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Stop the run's processes; 409 when it has ended."""
        try:
            run = cancel_run(self.get_object(), request.user)
        except RunError as exc:
            raise RunConflict(str(exc)) from None
        return Response(TrainingRunSerializer(run).data)

    @extend_schema(request=None, responses={200: TrainingRunSerializer, 409: ProblemSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        """Continue from the run's last checkpoint; 409 when there is none or it is still going."""
        try:
            run = resume_run(self.get_object(), request.user)
        except RunError as exc:
            raise RunConflict(str(exc)) from None
        return Response(TrainingRunSerializer(run).data)

    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="only steps logged after this one")],
        responses={200: MetricsSerializer},
        filters=False,
    )
    @action(detail=True, methods=["get"], pagination_class=None, filterset_class=None)
    def metrics(self, request: Request, pk: str | None = None) -> Response:
        """Logged steps after ?after=N (all of the latest page without it)."""
        run = self.get_object()
        raw = request.query_params.get("after")
        try:
            # Clamped to the column's range; SQLite cannot even bind an integer past 64 bits.
            after = min(max(int(raw), -1), 2**31 - 1) if raw is not None else None
        except ValueError:
            raise ValidationError({"after": "must be an integer"}) from None
        return Response({"status": run.status, "metrics": metric_rows(run, after=after)})


class CheckpointFilter(CreatedRangeFilterSet):
    kind = django_filters.ChoiceFilter(choices=choices(CheckpointKind))
    run = django_filters.NumberFilter(field_name="run_id")
    base_model = django_filters.CharFilter()

    class Meta:
        model = Checkpoint
        fields = ["kind", "run", "base_model"]


class CheckpointViewSet(viewsets.ReadOnlyModelViewSet[Checkpoint]):
    """Checkpoints written by training runs (policies and reward models), with their lineage."""

    serializer_class = CheckpointSerializer
    filterset_class = CheckpointFilter
    lookup_value_converter = "int"

    def get_queryset(self) -> QuerySet[Checkpoint]:
        return Checkpoint.objects.all()
