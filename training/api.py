"""REST API for training runs and checkpoints: launch, follow, cancel and resume runs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.roles import RESEARCHER, has_role
from training.config import MAX_CONFIG_BYTES, ConfigError
from training.models import Checkpoint, TrainingRun
from training.run_queries import metric_rows
from training.services import RunError, cancel_run, create_run, fail_lost_runs, last_checkpoint, resume_run


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

    def get_checkpoint(self, run: TrainingRun) -> dict[str, Any] | None:
        checkpoint = last_checkpoint(run)
        return {"id": checkpoint.pk, "path": checkpoint.path} if checkpoint else None


class LaunchSerializer(serializers.Serializer[Any]):
    # The rl_config as a JSON object, or as YAML/JSON text.
    config = serializers.JSONField()


class TrainingRunViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[TrainingRun]):
    serializer_class = TrainingRunSerializer
    filterset_fields = ["kind", "status"]

    def get_queryset(self) -> QuerySet[TrainingRun]:
        return TrainingRun.objects.select_related("created_by")

    def _researcher(self, request: Request) -> None:
        if not has_role(request.user, RESEARCHER):
            raise PermissionDenied("only researchers launch, cancel or resume training runs")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self._researcher(request)
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

    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        self._researcher(request)
        try:
            run = cancel_run(self.get_object(), request.user)
        except RunError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(TrainingRunSerializer(run).data)

    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        self._researcher(request)
        try:
            run = resume_run(self.get_object(), request.user)
        except RunError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(TrainingRunSerializer(run).data)

    @action(detail=True, methods=["get"])
    def metrics(self, request: Request, pk: str | None = None) -> Response:
        """Logged steps after ?after=N (all of the latest page without it)."""
        run = self.get_object()
        raw = request.query_params.get("after")
        try:
            after = int(raw) if raw is not None else None
        except ValueError:
            raise ValidationError({"after": "must be an integer"}) from None
        return Response({"status": run.status, "metrics": metric_rows(run, after=after)})


class CheckpointViewSet(viewsets.ReadOnlyModelViewSet[Checkpoint]):
    serializer_class = CheckpointSerializer
    filterset_fields = ["kind", "run"]

    def get_queryset(self) -> QuerySet[Checkpoint]:
        return Checkpoint.objects.all()
