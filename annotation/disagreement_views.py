"""Pages for a comparison set's agreement figures, its disagreements, and settling one pair.

Anyone with a role may look; only researchers resolve. Everything reviewers and agents wrote
(reasons, patches, statements) reaches the templates as text and is autoescaped there.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from annotation.agreement_report import agreement_report, disagreements, settled_for, verdict
from annotation.models import MAX_COMMENT, Comparison, ComparisonSet, Judgement
from annotation.resolutions import ResolutionError, resolve_pair
from core.permissions import role_required
from core.roles import RESEARCHER, has_role
from core.vocabulary import ComparisonChoice, choices

# The list page shows at most this many disagreements.
LIST_ROWS = 500


def _judgements() -> Prefetch:
    return Prefetch("judgements", queryset=Judgement.objects.select_related("reviewer").order_by("created_at", "id"))


@role_required()
def agreement(request: HttpRequest, name: str) -> HttpResponse:
    comparison_set = get_object_or_404(ComparisonSet, name=name)
    report = agreement_report(comparison_set)
    chart = {
        "x": [p["start"] for p in report["trend"]["points"]],
        "series": {"reviewers with the majority": [p["with_majority"] for p in report["trend"]["points"]]}
        | {
            f"{scorer} with people": [p["scorers"].get(scorer) for p in report["trend"]["points"]]
            for scorer in report["scorers"]
        },
    }
    return render(request, "annotation/agreement.html", {"cset": comparison_set, "r": report, "chart": chart})


@role_required()
def disagreement_list(request: HttpRequest, name: str) -> HttpResponse:
    comparison_set = get_object_or_404(ComparisonSet, name=name)
    judge = None if has_role(request.user, RESEARCHER) else request.user
    assert judge is None or isinstance(judge, User)
    pairs = list(disagreements(comparison_set, judge).prefetch_related(_judgements())[:LIST_ROWS])
    rows = []
    for c in pairs:
        votes = [j.choice for j in c.judgements.all()]
        rows.append({"c": c, "votes": votes, "verdict": verdict(votes, c.resolution)})
    return render(request, "annotation/disagreements.html", {"cset": comparison_set, "rows": rows})


@require_http_methods(["GET", "POST"])
@role_required()
def disagreement_detail(request: HttpRequest, name: str, pk: int) -> HttpResponse:
    comparison_set = get_object_or_404(ComparisonSet, name=name)
    comparison = get_object_or_404(
        Comparison.objects.select_related("comparison_set", "task", "trajectory_a", "trajectory_b").prefetch_related(
            _judgements()
        ),
        comparison_set=comparison_set,
        pk=pk,
    )
    can_resolve = has_role(request.user, RESEARCHER)
    assert isinstance(request.user, User)
    if not can_resolve and not settled_for(comparison, request.user):
        # Same answer as a pair that does not exist: its votes must not reach a reviewer
        # who may still be asked to judge it.
        raise Http404("No such disagreement.")
    error, status = "", 200
    if request.method == "POST":
        if not can_resolve:
            error, status = "Resolving a pair needs the researcher role.", 403
        else:
            try:
                resolve_pair(request.user, comparison, request.POST.get("choice", ""), request.POST.get("note", ""))
            except ResolutionError as exc:
                error, status = str(exc), 400
            else:
                return redirect("annotation:disagreement", name=comparison_set.name, pk=comparison.pk)
    judgements = list(comparison.judgements.all())
    context = {
        "cset": comparison_set,
        "c": comparison,
        "judgements": judgements,
        "verdict": verdict([j.choice for j in judgements], comparison.resolution),
        "can_resolve": can_resolve,
        "choices": choices(ComparisonChoice),
        "error": error,
        "max_note": MAX_COMMENT,
        "posted": request.POST if error else {},
    }
    return render(request, "annotation/disagreement.html", context, status=status)
