"""REST for the comparison queue: take the next pair (assigned and locked), judge it, skip it.

    GET  /api/v1/comparisons/next/?set=NAME       200 the blind pair | 204 the queue is done
    POST /api/v1/comparisons/<id>/judgements/     {"choice", "reason", "tags"} -> 201
    POST /api/v1/comparisons/<id>/skip/           -> 204

Choices are in the terms of the payload the reviewer was given: "A" is its `left` patch, "B"
its `right` one. Crucible stores every judgement in the pair's own A/B terms (sides are
randomised per reviewer), so clients never need to know how the sides were drawn.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import MAX_COMMENT, Comparison, ComparisonSet, Judgement
from annotation.pair_display import blind_pair
from annotation.queue import QueueError, judge, next_for
from annotation.queue import skip as skip_pair
from core.vocabulary import ComparisonChoice, values


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


class BlindPairSerializer(serializers.Serializer[dict[str, Any]]):
    """A pair as one reviewer is shown it: no policy, model, checkpoint, batch or reward."""

    id = serializers.IntegerField()
    set = serializers.CharField()
    task_id = serializers.CharField()
    statement = serializers.CharField()
    left = SideSerializer()
    right = SideSerializer()
    expires_at = serializers.DateTimeField()


class JudgementInSerializer(serializers.Serializer[dict[str, Any]]):
    choice = serializers.ChoiceField(
        choices=values(ComparisonChoice),
        help_text='"A": the payload\'s left patch is better; "B": its right patch; "tie"; "both_bad". '
        "Stored in the pair's own A/B terms whatever sides this reviewer was shown.",
    )
    reason = serializers.CharField(max_length=MAX_COMMENT, help_text="Why (required).")
    tags = serializers.ListField(
        child=serializers.ChoiceField(choices=list(Judgement.TAGS)), required=False, default=list, max_length=10
    )


class JudgementOutSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    comparison = serializers.IntegerField()
    choice = serializers.CharField(help_text="As sent: in the payload's left/right terms.")
    tags = serializers.ListField(child=serializers.CharField())


class ComparisonViewSet(viewsets.GenericViewSet[Comparison]):
    queryset = Comparison.objects.select_related("comparison_set", "task")
    pagination_class = None

    def _user(self) -> User:
        assert isinstance(self.request.user, User)
        return self.request.user

    @extend_schema(
        parameters=[OpenApiParameter("set", str, required=True, description="the comparison set's name")],
        responses={200: BlindPairSerializer, 204: None},
    )
    @action(detail=False, methods=["get"], url_path="next")
    def next(self, request: Request) -> Response:
        """Assign (and lock for the set's lock time) the caller's next pair; 204 when the queue is done."""
        name = request.query_params.get("set", "")
        if not name:
            raise ValidationError({"set": "name the comparison set: ?set=NAME"})
        cset = ComparisonSet.objects.filter(name=name).first()
        if cset is None:
            raise NotFound(f"no comparison set named {name!r}")
        assignment = next_for(self._user(), cset)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT, headers={"X-Queue-Done": cset.name})
        assignment.comparison = self.get_queryset().get(pk=assignment.comparison_id)
        return Response(BlindPairSerializer(dict(blind_pair(assignment))).data)

    @extend_schema(request=JudgementInSerializer, responses={201: JudgementOutSerializer})
    @action(detail=True, methods=["post"])
    def judgements(self, request: Request, pk: str | None = None) -> Response:
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

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["post"])
    def skip(self, request: Request, pk: str | None = None) -> Response:
        comparison = get_object_or_404(self.get_queryset(), pk=pk)
        try:
            skip_pair(self._user(), comparison)
        except QueueError as exc:
            raise QueueConflict(str(exc)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)
