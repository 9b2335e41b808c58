"""REST for comparison sets (drawn as the new-set page does), judgements, and preference sets.

A preference set is not a table of its own: it is a comparison set seen through people's
verdicts (annotation.preferences), the pairs that become TRL preference rows. The resource
says how many pairs have a verdict and lists each verdict with its lineage (which trajectory
was chosen, by whom, why); the TRL rows themselves, with the conversations, are the
preferences export (/api/v1/exports/). All of it is a researcher's, as the set pages are.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import django_filters
from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.agreement_report import verdict
from annotation.forms import ComparisonSetForm
from annotation.models import Comparison, ComparisonSet, Judgement
from annotation.pairs import MAX_PAIRS, MAX_REVIEWERS, PairsError, draw_pairs
from annotation.queue import set_progress
from core.api_filters import CreatedRangeFilterSet
from core.roles import RESEARCHER
from core.vocabulary import ComparisonChoice, ComparisonStrategy, choices
from tasks.models import TaskSuite

DECISIVE = (ComparisonChoice.A.value, ComparisonChoice.B.value)
RESEARCHERS_ONLY = {"list": RESEARCHER, "retrieve": RESEARCHER, "pairs": RESEARCHER}

SET_EXAMPLE = {
    "name": "sft-vs-base",
    "suite": "demo",
    "strategy": "checkpoints",
    "source": {"sides": [{"batch": 41}, {"batch": 42}]},
    "reviewers_per_pair": 3,
    "max_per_task": 5,
    "lock_seconds": 600,
    "blind": True,
    "stats": {"pairs": 36, "identical_patches_skipped": 4},
    "created_by": "rita-researcher",
    "created_at": "2026-11-02T10:00:00Z",
}
PROGRESS_EXAMPLE = {"pairs": 36, "done": 12, "judgements": 50, "needed": 108}


class ProgressSerializer(serializers.Serializer[dict[str, int]]):
    pairs = serializers.IntegerField()
    done = serializers.IntegerField(help_text="pairs with all their judgements")
    judgements = serializers.IntegerField()
    needed = serializers.IntegerField()


@extend_schema_serializer(
    examples=[OpenApiExample("set", value={**SET_EXAMPLE, "progress": PROGRESS_EXAMPLE}, response_only=True)]
)
class ComparisonSetSerializer(serializers.ModelSerializer[ComparisonSet]):
    suite: serializers.SlugRelatedField[TaskSuite] = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(slug_field="username", read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = ComparisonSet
        fields = [*SET_EXAMPLE, "progress"]
        read_only_fields = fields

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, cset: ComparisonSet) -> dict[str, int]:
        progress: dict[int, dict[str, int]] = self.context.get("progress") or set_progress([cset])
        return progress[cset.pk]


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "two checkpoints' batches",
            value={
                "name": "sft-vs-base",
                "suite": "demo",
                "strategy": "checkpoints",
                "side_a": "batch:41",
                "side_b": "batch:42",
                "max_pairs": 50,
                "reviewers": 3,
            },
            request_only=True,
        )
    ]
)
class ComparisonSetCreateSerializer(serializers.Serializer[dict[str, Any]]):
    """What POST takes (annotation.forms.ComparisonSetForm validates it, as on the new-set page)."""

    name = serializers.SlugField(max_length=100)
    suite = serializers.CharField(help_text="the suite's name")
    strategy = serializers.ChoiceField(choices=choices(ComparisonStrategy))
    max_pairs = serializers.IntegerField(min_value=1, max_value=MAX_PAIRS, required=False, default=50)
    reviewers = serializers.IntegerField(min_value=1, max_value=MAX_REVIEWERS, required=False, default=1)
    per_task = serializers.IntegerField(min_value=1, required=False, default=5)
    batches = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False)
    training_set = serializers.SlugField(required=False, help_text="narrow to a training set's trajectories")
    side_a = serializers.CharField(required=False, help_text="checkpoints strategy: batch:ID or model:NAME")
    side_b = serializers.CharField(required=False, help_text="checkpoints strategy: batch:ID or model:NAME")
    seed = serializers.IntegerField(required=False, default=0)
    lock_minutes = serializers.IntegerField(min_value=1, max_value=24 * 60, required=False, default=10)


class ComparisonSetFilter(CreatedRangeFilterSet):
    suite = django_filters.CharFilter(field_name="suite__name")
    strategy = django_filters.ChoiceFilter(choices=choices(ComparisonStrategy))

    class Meta:
        model = ComparisonSet
        fields = ["suite", "strategy"]


def _form_data(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValidationError({"non_field_errors": ["send a JSON object"]})
    defaults = {"max_pairs": 50, "reviewers": 1, "per_task": 5, "seed": 0, "lock_minutes": 10}
    fields = {**defaults, **{k: v for k, v in data.items() if k in ComparisonSetForm.base_fields}}
    if isinstance(fields.get("batches"), list):
        fields["batches"] = ",".join(str(b) for b in fields["batches"])
    return fields


class ComparisonSetViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[ComparisonSet]):
    """Comparison sets: pairs of patches drawn for reviewers to judge."""

    serializer_class = ComparisonSetSerializer
    filterset_class = ComparisonSetFilter
    lookup_field = "name"
    lookup_value_converter = "slug"
    action_roles = RESEARCHERS_ONLY

    def get_queryset(self) -> QuerySet[ComparisonSet]:
        return ComparisonSet.objects.select_related("suite", "created_by")

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        page = getattr(self, "_page_sets", None)
        if page is not None:
            context["progress"] = set_progress(page)  # one query for the page, not one per set
        return context

    def paginate_queryset(self, queryset: Any) -> Any:
        page = super().paginate_queryset(queryset)
        self._page_sets = page
        return page

    @extend_schema(request=ComparisonSetCreateSerializer, responses={201: ComparisonSetSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Draw the pairs of a new set, as the new-set page does; nothing is written when it fails."""
        suites = list(TaskSuite.objects.order_by("name").values_list("name", flat=True))
        form = ComparisonSetForm(_form_data(request.data), suites=suites)
        if not form.is_valid():
            raise ValidationError(
                {("non_field_errors" if k == "__all__" else k): [str(e) for e in v] for k, v in form.errors.items()}
            )
        assert isinstance(request.user, User)
        try:
            cset = draw_pairs(form.request(), created_by=request.user)
        except PairsError as exc:
            # Keyed by the parameter at fault where the refusal names one (side_a, max_pairs, name).
            raise ValidationError({exc.field or "non_field_errors": [str(exc)]}) from None
        return Response(ComparisonSetSerializer(cset).data, status=status.HTTP_201_CREATED)


JUDGEMENT_EXAMPLE = {
    "id": 9,
    "comparison": 3,
    "set": "sft-vs-base",
    "reviewer": "rob-reviewer",
    "choice": "A",
    "reason": "Fixes the bug without touching the tests.",
    "tags": ["correct"],
    "swapped": False,
    "duration_ms": 41000,
    "created_at": "2026-11-02T10:05:00Z",
}


@extend_schema_serializer(examples=[OpenApiExample("judgement", value=JUDGEMENT_EXAMPLE, response_only=True)])
class JudgementSerializer(serializers.ModelSerializer[Judgement]):
    """A judgement in the pair's own A/B terms (whatever sides the reviewer was shown: `swapped`)."""

    set = serializers.CharField(source="comparison.comparison_set.name", read_only=True)
    reviewer: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Judgement
        fields = list(JUDGEMENT_EXAMPLE)
        read_only_fields = fields


class JudgementFilter(CreatedRangeFilterSet):
    set = django_filters.CharFilter(field_name="comparison__comparison_set__name")
    comparison = django_filters.NumberFilter(field_name="comparison_id")
    reviewer = django_filters.CharFilter(field_name="reviewer__username")
    choice = django_filters.ChoiceFilter(choices=choices(ComparisonChoice))

    class Meta:
        model = Judgement
        fields = ["set", "comparison", "reviewer", "choice"]


class JudgementViewSet(viewsets.ReadOnlyModelViewSet[Judgement]):
    """Every judgement (reviewers judge through /comparisons/<id>/judgements/)."""

    serializer_class = JudgementSerializer
    filterset_class = JudgementFilter
    lookup_value_converter = "int"
    action_roles = RESEARCHERS_ONLY

    def get_queryset(self) -> QuerySet[Judgement]:
        return Judgement.objects.select_related("comparison__comparison_set", "reviewer")


PREFERENCE_SET_EXAMPLE = {
    "name": "sft-vs-base",
    "suite": "demo",
    "reviewers_per_pair": 3,
    "pairs": 36,
    "with_verdict": 14,
    "preferences": 11,
    "ties": 3,
    "waiting": 22,
}
VERDICT_EXAMPLE = {
    "pair_id": 3,
    "task_id": "task_0001",
    "verdict": "A",
    "chosen_trajectory_id": "0b6f3f0e-4f0c-5a43-9d3e-0c6d5d1f8a11",
    "rejected_trajectory_id": "5d0e8c1a-2b7f-5d11-8e0a-7c3b9f2e4d55",
    "margin": 0.6667,
    "reviewers": ["rob-reviewer", "ann-reviewer", "ivy-reviewer"],
    "choices": ["A", "A", "B"],
    "resolution_note": "",
}


@extend_schema_serializer(examples=[OpenApiExample("preference set", value=PREFERENCE_SET_EXAMPLE, response_only=True)])
class PreferenceSetSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    suite = serializers.CharField()
    reviewers_per_pair = serializers.IntegerField()
    pairs = serializers.IntegerField()
    with_verdict = serializers.IntegerField(help_text="pairs people reached a verdict on (resolution or majority)")
    preferences = serializers.IntegerField(help_text="verdicts that prefer a side: the TRL rows")
    ties = serializers.IntegerField(help_text="tie or both-bad verdicts (exported only when asked)")
    waiting = serializers.IntegerField(help_text="pairs without a verdict yet")


@extend_schema_serializer(examples=[OpenApiExample("verdict", value=VERDICT_EXAMPLE, response_only=True)])
class VerdictSerializer(serializers.Serializer[dict[str, Any]]):
    pair_id = serializers.IntegerField()
    task_id = serializers.CharField()
    verdict = serializers.ChoiceField(choices=choices(ComparisonChoice))
    chosen_trajectory_id = serializers.UUIDField(help_text="A for tie and both-bad verdicts")
    rejected_trajectory_id = serializers.UUIDField()
    margin = serializers.FloatField(help_text="the share of reviewers who chose the verdict")
    reviewers = serializers.ListField(child=serializers.CharField())
    choices = serializers.ListField(child=serializers.CharField())
    resolution_note = serializers.CharField()


def _verdicts(cset: ComparisonSet, pairs: QuerySet[Comparison]) -> list[dict[str, Any]]:
    """People's verdict on each pair that has one, by the rule the preferences export uses."""
    votes: dict[int, list[tuple[str, str]]] = defaultdict(list)
    rows = (
        Judgement.objects.filter(comparison__in=pairs)
        .order_by("created_at", "id")
        .values_list("comparison_id", "reviewer__username", "choice")
    )
    for pair_pk, reviewer, choice in rows:
        votes[pair_pk].append((reviewer, choice))
    out = []
    for pair in pairs.select_related("trajectory_a", "trajectory_b"):
        mine = votes.get(pair.pk, [])
        if not pair.resolution and len(mine) < cset.reviewers_per_pair:
            continue  # still in the queue
        picked = [choice for _, choice in mine]
        found = verdict(picked, pair.resolution)
        if found is None:
            continue
        a, b = pair.trajectory_a, pair.trajectory_b
        chosen, rejected = (b, a) if found == ComparisonChoice.B else (a, b)
        out.append(
            {
                "pair_id": pair.pk,
                "task_id": pair.task_ref,
                "verdict": found,
                "chosen_trajectory_id": chosen.trajectory_id,
                "rejected_trajectory_id": rejected.trajectory_id,
                "margin": round(picked.count(found) / len(picked), 4) if picked else 1.0,
                "reviewers": [reviewer for reviewer, _ in mine],
                "choices": picked,
                "resolution_note": pair.resolution_note,
            }
        )
    return out


def _summary(cset: ComparisonSet) -> dict[str, Any]:
    pairs = Comparison.objects.filter(comparison_set=cset)
    found = _verdicts(cset, pairs)
    preferences = sum(v["verdict"] in DECISIVE for v in found)
    total = pairs.count()
    return {
        "name": cset.name,
        "suite": cset.suite.name if cset.suite else "",
        "reviewers_per_pair": cset.reviewers_per_pair,
        "pairs": total,
        "with_verdict": len(found),
        "preferences": preferences,
        "ties": len(found) - preferences,
        "waiting": total - len(found),
    }


class PreferenceSetViewSet(viewsets.ReadOnlyModelViewSet[ComparisonSet]):  # type: ignore[misc]
    """Comparison sets through people's verdicts: what a preference export of each would hold."""

    serializer_class = PreferenceSetSerializer  # type: ignore[assignment]  # a summary, not the model's fields
    filterset_class = ComparisonSetFilter
    lookup_field = "name"
    lookup_value_converter = "slug"
    action_roles = RESEARCHERS_ONLY

    def get_queryset(self) -> QuerySet[ComparisonSet]:
        return ComparisonSet.objects.select_related("suite")

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        assert page is not None
        return self.get_paginated_response([_summary(cset) for cset in page])

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(_summary(self.get_object()))

    @extend_schema(responses={200: VerdictSerializer(many=True)}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None)
    def pairs(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Each pair's verdict with its lineage, a cursor page of pairs at a time."""
        cset = self.get_object()
        page: list[Comparison] | None = self.paginator.paginate_queryset(  # type: ignore[union-attr]
            Comparison.objects.filter(comparison_set=cset), request, view=self
        )
        assert page is not None
        ids = [pair.pk for pair in page]
        rows = _verdicts(cset, Comparison.objects.filter(pk__in=ids).order_by("-created_at", "-id"))
        data = VerdictSerializer(rows, many=True).data  # type: ignore[arg-type]
        return self.get_paginated_response(data)
