"""REST for the comparison queue: take the next pair (assigned and locked), judge it, skip it.

    GET  /api/v1/comparisons/next/?set=NAME       200 the blind pair | 204 the queue is done
    POST /api/v1/comparisons/<id>/judgements/     {"choice", "reason", "tags"} -> 201
    POST /api/v1/comparisons/<id>/skip/           -> 204
    GET  /api/v1/comparisons/[<id>/]              researchers: pairs with both trajectory ids

Reviewers take and judge pairs; listing pairs (which trajectory is which side) is a
researcher's, as the comparison set pages are.

Choices are in the terms of the payload the reviewer was given: "A" is its `left` patch, "B"
its `right` one. Crucible stores every judgement in the pair's own A/B terms (sides are
randomised per reviewer), so clients never need to know how the sides were drawn.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.contrib.auth.models import User
from django.core.validators import slug_re
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import MAX_COMMENT, Comparison, ComparisonSet, Judgement
from annotation.pair_display import blind_pair
from annotation.queue import QueueError, judge, next_for
from annotation.queue import skip as skip_pair
from core.api_filters import CreatedRangeFilterSet
from core.api_schema import ProblemSerializer
from core.roles import RESEARCHER, REVIEWER
from core.vocabulary import ComparisonChoice, choices
from trajectories.models import Trajectory


class QueueConflict(APIException):
    """The pair is not the caller's to judge now (not assigned, taken over, judged already, ...)."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "queue_conflict"


class TestCountSerializer(serializers.Serializer[dict[str, Any]]):
    list = serializers.CharField()
    description = serializers.CharField()
    passed = serializers.IntegerField()
    total = serializers.IntegerField()


class SideSerializer(serializers.Serializer[dict[str, Any]]):
    patch = serializers.CharField()
    tests = TestCountSerializer(many=True)
    trajectory_url = serializers.CharField()


SIDE_EXAMPLE = {
    "patch": "--- a/configlib.py\n+++ b/configlib.py\n...",
    "tests": [{"list": "fail_to_pass", "description": "tests the task asks to fix", "passed": 1, "total": 1}],
    "trajectory_url": "/annotation/compare/3/trajectory/left/",
}


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "blind pair",
            value={
                "id": 3,
                "set": "sft-vs-base",
                "task_id": "task_0001",
                "statement": "parse_config drops the last line...",
                "left": SIDE_EXAMPLE,
                "right": SIDE_EXAMPLE,
                "expires_at": "2026-11-02T10:10:00Z",
            },
            response_only=True,
        )
    ]
)
class BlindPairSerializer(serializers.Serializer[dict[str, Any]]):
    """A pair as one reviewer is shown it: no policy, model, checkpoint, batch or reward."""

    id = serializers.IntegerField()
    set = serializers.CharField()
    task_id = serializers.CharField()
    statement = serializers.CharField()
    left = SideSerializer()
    right = SideSerializer()
    expires_at = serializers.DateTimeField()


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "left is better",
            value={"choice": "A", "reason": "Fixes the bug without touching the tests.", "tags": ["correct"]},
            request_only=True,
        )
    ]
)
class JudgementInSerializer(serializers.Serializer[dict[str, Any]]):
    choice = serializers.ChoiceField(
        choices=choices(ComparisonChoice),
        help_text='"A": the payload\'s left patch is better; "B": its right patch; "tie"; "both_bad". '
        "Stored in the pair's own A/B terms whatever sides this reviewer was shown.",
    )
    reason = serializers.CharField(max_length=MAX_COMMENT, help_text="Why (required).")
    tags = serializers.ListField(
        child=serializers.ChoiceField(choices=list(Judgement.TAGS)), required=False, default=list, max_length=10
    )


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "judged", value={"id": 9, "comparison": 3, "choice": "A", "tags": ["correct"]}, response_only=True
        )
    ]
)
class JudgementOutSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    comparison = serializers.IntegerField()
    choice = serializers.CharField(help_text="As sent: in the payload's left/right terms.")
    tags = serializers.ListField(child=serializers.CharField())


COMPARISON_EXAMPLE = {
    "id": 3,
    "set": "sft-vs-base",
    "task_id": "task_0001",
    "trajectory_a": "0b6f3f0e-4f0c-5a43-9d3e-0c6d5d1f8a11",
    "trajectory_b": "5d0e8c1a-2b7f-5d11-8e0a-7c3b9f2e4d55",
    "position": 0,
    "judgement_count": 1,
    "resolution": "",
    "resolution_note": "",
    "created_at": "2026-11-02T10:00:00Z",
}


@extend_schema_serializer(examples=[OpenApiExample("pair", value=COMPARISON_EXAMPLE, response_only=True)])
class ComparisonSerializer(serializers.ModelSerializer[Comparison]):
    """A pair as researchers see it: which trajectory is A and which is B."""

    set = serializers.CharField(source="comparison_set.name", read_only=True)
    task_id = serializers.CharField(source="task_ref", read_only=True)
    trajectory_a: serializers.SlugRelatedField[Trajectory] = serializers.SlugRelatedField(
        slug_field="trajectory_id", read_only=True
    )
    trajectory_b: serializers.SlugRelatedField[Trajectory] = serializers.SlugRelatedField(
        slug_field="trajectory_id", read_only=True
    )

    class Meta:
        model = Comparison
        fields = list(COMPARISON_EXAMPLE)
        read_only_fields = fields


class ComparisonFilter(CreatedRangeFilterSet):
    set = django_filters.CharFilter(field_name="comparison_set__name")
    task = django_filters.CharFilter(field_name="task_ref")
    resolution = django_filters.ChoiceFilter(choices=choices(ComparisonChoice))

    class Meta:
        model = Comparison
        fields = ["set", "task", "resolution"]


class ComparisonViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Comparison]):
    """Pairs to judge: reviewers take the next one and judge or skip it; researchers list them."""

    serializer_class = ComparisonSerializer
    lookup_value_converter = "int"
    filterset_class = ComparisonFilter
    action_roles = {"list": RESEARCHER, "retrieve": RESEARCHER, "judgements": REVIEWER, "skip": REVIEWER}

    def get_queryset(self) -> QuerySet[Comparison]:
        return Comparison.objects.select_related("comparison_set", "task", "trajectory_a", "trajectory_b")

    def _user(self) -> User:
        assert isinstance(self.request.user, User)
        return self.request.user

    @extend_schema(
        parameters=[OpenApiParameter("set", str, required=True, description="the comparison set's name")],
        responses={200: BlindPairSerializer, 204: None},
        filters=False,
    )
    @action(detail=False, methods=["get"], url_path="next", pagination_class=None, filterset_class=None)
    def next(self, request: Request) -> Response:
        """Assign (and lock for the set's lock time) the caller's next pair; 204 when the queue is done."""
        name = request.query_params.get("set", "")
        if not name:
            raise ValidationError({"set": "name the comparison set: ?set=NAME"})
        # Set names are slugs: anything else names no set, and never reaches the database
        # (PostgreSQL refuses a NUL in a query: that would be a server error).
        cset = ComparisonSet.objects.filter(name=name).first() if slug_re.fullmatch(name) else None
        if cset is None:
            raise NotFound(f"no comparison set named {name[:100]!r}")
        assignment = next_for(self._user(), cset)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT, headers={"X-Queue-Done": cset.name})
        assignment.comparison = self.get_queryset().get(pk=assignment.comparison_id)
        return Response(BlindPairSerializer(dict(blind_pair(assignment))).data)

    @extend_schema(request=JudgementInSerializer, responses={201: JudgementOutSerializer, 409: ProblemSerializer})
    @action(detail=True, methods=["post"])
    def judgements(self, request: Request, pk: str | None = None) -> Response:
        """Judge the pair you were given by /next/, in the payload's left (A) / right (B) terms."""
        comparison = get_object_or_404(self.get_queryset(), pk=pk)
        incoming = JudgementInSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        try:
            judgement = judge(self._user(), comparison, data["choice"], data["reason"], data["tags"])
        except QueueError as exc:
            raise QueueConflict(str(exc)) from None
        out = {"id": judgement.pk, "comparison": comparison.pk, "choice": data["choice"], "tags": judgement.tags}
        return Response(JudgementOutSerializer(out).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None, 409: ProblemSerializer})
    @action(detail=True, methods=["post"])
    def skip(self, request: Request, pk: str | None = None) -> Response:
        """Pass on the pair you were given for good; it goes back to the queue for others."""
        comparison = get_object_or_404(self.get_queryset(), pk=pk)
        try:
            skip_pair(self._user(), comparison)
        except QueueError as exc:
            raise QueueConflict(str(exc)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)
