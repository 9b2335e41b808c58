"""REST: list and read eval runs; researchers launch them (POST /api/v1/eval-runs/)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from core.roles import RESEARCHER, REVIEWER, has_role
from core.vocabulary import LAUNCHABLE_POLICIES
from evaluation.forms import EvalRunForm
from evaluation.models import EvalRun
from evaluation.queries import eval_runs
from evaluation.services import EvalError, refresh_eval


class ResearchersLaunch(BasePermission):
    message = "Launching an evaluation needs the researcher role."

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, RESEARCHER if request.method == "POST" else REVIEWER)


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
    force = serializers.BooleanField(required=False, help_text="run despite a train/eval overlap (recorded)")


class EvalRunViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet[EvalRun]
):
    """Create takes {suite, policy | checkpoint, model, k: "1,5", samples, temperature, base_url, force}."""

    serializer_class = EvalRunSerializer
    permission_classes = [ResearchersLaunch]

    def get_queryset(self) -> QuerySet[EvalRun]:
        return eval_runs()

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        run = refresh_eval(self.get_object())
        return Response(self.get_serializer(run).data)

    @extend_schema(request=EvalRunLaunchSerializer, responses={201: EvalRunSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not isinstance(request.data, dict):
            return Response({"detail": "send a JSON object"}, status=status.HTTP_400_BAD_REQUEST)
        data = dict(request.data.items())
        if isinstance(data.get("k"), list):
            data["k"] = ",".join(str(k) for k in data["k"])
        form = EvalRunForm(data)
        if not form.is_valid():
            errors = {key: [str(e) for e in value] for key, value in form.errors.items()}
            return Response(errors, status=status.HTTP_400_BAD_REQUEST)
        try:
            run = form.launch(request.user)
        except EvalError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(self.get_serializer(run).data, status=status.HTTP_201_CREATED)
