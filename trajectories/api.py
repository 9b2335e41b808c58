"""REST for trajectories (read-only: they come from rollouts and imports) and their steps."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_filters import UtcDateTimeFilter
from core.vocabulary import TrajectoryStatus, choices
from tasks.models import TaskSuite
from trajectories.models import Step, Trajectory
from trajectories.queries import TrajectoryFilter

STEP_LIMIT = 500
STEP_MAX = 2**31 - 1  # the column's range; SQLite cannot even bind an integer past 64 bits

STEP_EXAMPLE = {
    "step": 1,
    "action_type": "bash",
    "action_input": "python -m pytest -q tests",
    "observation": "1 failed, 4 passed in 0.31s",
    "observation_truncated": False,
    "thought": "Run the tests first to see what fails.",
    "reward": None,
    "reward_breakdown": {},
    "timestamp": "2026-11-02T09:10:01Z",
    "duration_ms": 412.0,
    "exit_code": 1,
}
TRAJECTORY_EXAMPLE = {
    "trajectory_id": "0b6f3f0e-4f0c-5a43-9d3e-0c6d5d1f8a11",
    "schema_version": 1,
    "task_id": "task_0001",
    "suite": "demo",
    "task_version": "9b1d0c2a",
    "base_commit": "3f2c1e0",
    "prompt": "Fix the bug described below...",
    "policy": {"kind": "hf", "model": "smollm2-135m-instruct", "temperature": 0.8},
    "sandbox": {"backend": "bwrap"},
    "patch": "--- a/configlib.py\n+++ b/configlib.py\n...",
    "final_reward": 1.0,
    "success": True,
    "termination": "submitted",
    "flags": [],
    "claimed": {},
    "scored_spec": "default@3",
    "scored_at": "2026-11-02T09:12:00Z",
    "source": "rollout",
    "step_count": 7,
    "created_at": "2026-11-02T09:10:00Z",
}


@extend_schema_serializer(examples=[OpenApiExample("step", value=STEP_EXAMPLE, response_only=True)])
class StepSerializer(serializers.ModelSerializer[Step]):
    class Meta:
        model = Step
        fields = list(STEP_EXAMPLE)


@extend_schema_serializer(examples=[OpenApiExample("trajectory", value=TRAJECTORY_EXAMPLE, response_only=True)])
class TrajectorySerializer(serializers.ModelSerializer[Trajectory]):
    task_id = serializers.CharField(source="task_ref")
    suite: serializers.SlugRelatedField[TaskSuite] = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Trajectory
        fields = list(TRAJECTORY_EXAMPLE)


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "trajectory with steps", value={**TRAJECTORY_EXAMPLE, "steps": [STEP_EXAMPLE]}, response_only=True
        )
    ]
)
class TrajectoryDetailSerializer(TrajectorySerializer):
    steps = StepSerializer(many=True, read_only=True)

    class Meta(TrajectorySerializer.Meta):
        fields = [*TrajectorySerializer.Meta.fields, "steps"]


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "steps after 0",
            value={
                "status": "finished",
                "attempt": 1,
                "step_count": 7,
                "termination": "submitted",
                "error": "",
                "policy_kind": "hf",
                "policy_model": "smollm2-135m-instruct",
                "steps": [STEP_EXAMPLE],
            },
            response_only=True,
        )
    ]
)
class StepPageSerializer(serializers.Serializer[dict[str, Any]]):
    """The trajectory's header (so a live client repaints it) and a page of its steps."""

    status = serializers.ChoiceField(choices=choices(TrajectoryStatus))
    attempt = serializers.IntegerField(help_text="the attempt the steps belong to; a new one starts over")
    step_count = serializers.IntegerField()
    termination = serializers.CharField()
    error = serializers.CharField()
    policy_kind = serializers.CharField()
    policy_model = serializers.CharField()
    steps = StepSerializer(many=True)


class TrajectoryApiFilter(TrajectoryFilter):
    status = django_filters.ChoiceFilter(choices=choices(TrajectoryStatus))
    # As the list's, but in UTC: PostgreSQL refuses some offsets ISO 8601 allows (core.api_filters).
    created_after = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")


class TrajectoryViewSet(viewsets.ReadOnlyModelViewSet[Trajectory]):
    """Trajectories: filter by suite, task, batch, policy, reward, flags, text; each with its steps."""

    lookup_field = "trajectory_id"
    lookup_value_converter = "uuid"
    filterset_class = TrajectoryApiFilter

    def get_queryset(self) -> QuerySet[Trajectory]:
        qs = Trajectory.objects.select_related("suite")
        if self.action == "retrieve":
            return qs.prefetch_related("steps")
        return qs

    def get_serializer_class(self) -> Any:
        return TrajectoryDetailSerializer if self.action == "retrieve" else TrajectorySerializer

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="steps with a number above this (default 0)"),
            OpenApiParameter(
                "limit", int, description=f"at most this many steps (1-{STEP_LIMIT}, default {STEP_LIMIT})"
            ),
        ],
        responses={200: StepPageSerializer},
        filters=False,
    )
    @action(detail=True, methods=["get"], pagination_class=None, filterset_class=None)
    def steps(self, request: Request, trajectory_id: str | None = None) -> Response:
        """Steps after ?after=N (at most ?limit=, 500): a live page catching up, or one step's full text."""
        trajectory = self.get_object()
        try:
            after = int(request.query_params.get("after", "0"))
            limit = min(max(1, int(request.query_params.get("limit", str(STEP_LIMIT)))), STEP_LIMIT)
        except ValueError:
            raise ValidationError({"after": "must be an integer", "limit": "must be an integer"}) from None
        steps = trajectory.steps.filter(step__gt=min(max(after, -1), STEP_MAX)).order_by("step")[:limit]
        # The header and provenance come along, so a live page that reconnects repaints them too.
        head = {
            "status": trajectory.status,
            "attempt": trajectory.attempt,
            "step_count": trajectory.step_count,
            "termination": trajectory.termination,
            "error": trajectory.error if trajectory.status != Trajectory.Status.CANCELLED else "",
            "policy_kind": trajectory.policy_kind,
            "policy_model": trajectory.policy_model,
        }
        return Response({**head, "steps": StepSerializer(steps, many=True).data})
