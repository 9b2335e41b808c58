from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from tasks.models import TaskSuite
from trajectories.models import Step, Trajectory
from trajectories.queries import TrajectoryFilter


class StepSerializer(serializers.ModelSerializer[Step]):
    class Meta:
        model = Step
        fields = [
            "step",
            "action_type",
            "action_input",
            "observation",
            "observation_truncated",
            "thought",
            "reward",
            "reward_breakdown",
            "timestamp",
            "duration_ms",
            "exit_code",
        ]


class TrajectorySerializer(serializers.ModelSerializer[Trajectory]):
    task_id = serializers.CharField(source="task_ref")
    suite: serializers.SlugRelatedField[TaskSuite] = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Trajectory
        fields = [
            "trajectory_id",
            "schema_version",
            "task_id",
            "suite",
            "task_version",
            "base_commit",
            "prompt",
            "policy",
            "sandbox",
            "patch",
            "final_reward",
            "success",
            "termination",
            "flags",
            "claimed",
            "scored_spec",
            "scored_at",
            "source",
            "step_count",
            "created_at",
        ]


class TrajectoryDetailSerializer(TrajectorySerializer):
    steps = StepSerializer(many=True, read_only=True)

    class Meta(TrajectorySerializer.Meta):
        fields = [*TrajectorySerializer.Meta.fields, "steps"]


class TrajectoryViewSet(viewsets.ReadOnlyModelViewSet[Trajectory]):
    lookup_field = "trajectory_id"
    filterset_class = TrajectoryFilter

    def get_queryset(self) -> QuerySet[Trajectory]:
        qs = Trajectory.objects.select_related("suite")
        if self.action == "retrieve":
            return qs.prefetch_related("steps")
        return qs

    def get_serializer_class(self) -> Any:
        return TrajectoryDetailSerializer if self.action == "retrieve" else TrajectorySerializer

    @action(detail=True, methods=["get"])
    def steps(self, request: Request, trajectory_id: str | None = None) -> Response:
        """Steps after ?after=N (at most ?limit=, 500): a live page catching up, or one step's full text."""
        trajectory = self.get_object()
        try:
            after = int(request.query_params.get("after", "0"))
            limit = min(max(1, int(request.query_params.get("limit", "500"))), 500)
        except ValueError:
            raise ValidationError({"after": "must be an integer", "limit": "must be an integer"}) from None
        steps = trajectory.steps.filter(step__gt=after).order_by("step")[:limit]
        # The header and provenance come along, so a live page that reconnects repaints them too.
        head = {
            "status": trajectory.status,
            "step_count": trajectory.step_count,
            "termination": trajectory.termination,
            "error": trajectory.error if trajectory.status != Trajectory.Status.CANCELLED else "",
            "policy_kind": trajectory.policy_kind,
            "policy_model": trajectory.policy_model,
        }
        return Response({**head, "steps": StepSerializer(steps, many=True).data})
