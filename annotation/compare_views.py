"""Pages of the pairwise comparison queue: the queue, the review screen, guidelines, and the
researchers' pages that draw and inspect comparison sets."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.forms import ComparisonSetForm, JudgementForm
from annotation.models import Assignment, Comparison, ComparisonSet
from annotation.pair_display import blind_pair, cached_diff_html, highlighted_diff_html, plain_diff_html
from annotation.pairs import PairsError, draw_pairs
from annotation.queue import (
    QueueError,
    claim,
    judge,
    next_for,
    remaining_for,
    reviewer_progress,
    set_progress,
    skip,
)
from core.permissions import role_required
from core.roles import RESEARCHER, has_role
from tasks.models import TaskSuite
from trajectories.models import Trajectory


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


@role_required()
def queue_page(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    sets = list(ComparisonSet.objects.select_related("suite"))
    progress = set_progress(sets)
    mine = {row["set"]: row for row in reviewer_progress(sets, user)}
    rows = [
        {"set": c, "progress": progress[c.pk], "mine": mine.get(c.pk), "left": remaining_for(user, c)} for c in sets
    ]
    researcher = has_role(user, RESEARCHER)
    by_name = {c.pk: c.name for c in sets}
    everyone = reviewer_progress(sets) if researcher else []
    for row in everyone:
        row["set_name"] = by_name[row["set"]]  # type: ignore[index]
    done_set = request.GET.get("done", "")
    return render(
        request,
        "annotation/queue.html",
        {"rows": rows, "everyone": everyone, "can_research": researcher, "done_set": done_set},
    )


@role_required()
def next_pair(request: HttpRequest, name: str) -> HttpResponse:
    cset = get_object_or_404(ComparisonSet, name=name)
    assignment = next_for(_user(request), cset)
    if assignment is None:
        return redirect(f"{reverse('annotation:queue')}?done={cset.name}")
    return redirect("annotation:compare", pk=assignment.comparison_id)


@role_required()
def compare(request: HttpRequest, pk: int) -> HttpResponse:
    comparison = get_object_or_404(Comparison.objects.select_related("comparison_set", "task"), pk=pk)
    user = _user(request)
    if request.method == "POST":
        form = JudgementForm(request.POST)
        if form.is_valid():
            try:
                data = form.cleaned_data
                judge(user, comparison, data["choice"], data["reason"], data["tags"])
            except QueueError as exc:
                form.add_error(None, str(exc))
            else:
                return redirect("annotation:next", name=comparison.comparison_set.name)
        assignment = Assignment.objects.filter(comparison=comparison, reviewer=user).first()
        if assignment is None:
            return _unavailable(request, comparison, "this pair is not assigned to you")
        assignment.comparison = comparison
        return _review(request, assignment, form, status=400)
    try:
        assignment = claim(user, comparison)
    except QueueError as exc:
        return _unavailable(request, comparison, str(exc))
    assignment.comparison = comparison
    return _review(request, assignment, JudgementForm())


def _review(request: HttpRequest, assignment: Assignment, form: JudgementForm, status: int = 200) -> HttpResponse:
    pair = blind_pair(assignment)
    context = {
        "pair": pair,
        "form": form,
        "left": _diff(pair["left"]["patch"]),
        "right": _diff(pair["right"]["patch"]),
        "cset": assignment.comparison.comparison_set,
    }
    return render(request, "annotation/compare.html", context, status=status)


def _diff(patch: str) -> dict[str, object]:
    # Highlighting is slow (see annotation.pair_display): the page shows it only when cached,
    # else the plain diff, which the highlighted one replaces when its own request answers.
    cached = cached_diff_html(patch)
    return {"diff": cached if cached is not None else plain_diff_html(patch), "highlighted": cached is not None}


def _unavailable(request: HttpRequest, comparison: Comparison, message: str) -> HttpResponse:
    context = {"message": message, "cset": comparison.comparison_set}
    return render(request, "annotation/compare.html", context, status=409)


@require_POST
@role_required()
def skip_pair(request: HttpRequest, pk: int) -> HttpResponse:
    comparison = get_object_or_404(Comparison.objects.select_related("comparison_set"), pk=pk)
    try:
        skip(_user(request), comparison)
    except QueueError as exc:
        return _unavailable(request, comparison, str(exc))
    return redirect("annotation:next", name=comparison.comparison_set.name)


def _assigned_side(request: HttpRequest, pk: int, side: str) -> Trajectory:
    """The trajectory this reviewer was shown on `side` of pair `pk` (404 for anyone not assigned)."""
    if side not in ("left", "right"):
        raise Http404("no such side")
    assignment = get_object_or_404(
        Assignment.objects.select_related("comparison"), comparison_id=pk, reviewer=_user(request)
    )
    comparison = assignment.comparison
    shows_a = (side == "left") != assignment.swapped
    trajectory_pk = comparison.trajectory_a_id if shows_a else comparison.trajectory_b_id
    return get_object_or_404(Trajectory.objects.only("trajectory_id", "patch"), pk=trajectory_pk)


@role_required()
def compare_diff(request: HttpRequest, pk: int, side: str) -> HttpResponse:
    """One side's patch, highlighted: the review page swaps it in for the plain diff."""
    trajectory = _assigned_side(request, pk, side)
    context = {"diff": highlighted_diff_html(trajectory.patch), "highlighted": True, "side": side, "pair_id": pk}
    return render(request, "annotation/_compare_diff.html", context)


@role_required()
def compare_trajectory(request: HttpRequest, pk: int, side: str) -> HttpResponse:
    """The trajectory behind the left or right patch, for the reviewer who was shown them.

    Going through the assignment keeps trajectory ids out of the review page: which trajectory
    is on which side is this reviewer's own draw.
    """
    trajectory = _assigned_side(request, pk, side)
    return redirect("trajectories:detail", trajectory_id=trajectory.trajectory_id)


@role_required()
def guidelines(request: HttpRequest) -> HttpResponse:
    return render(request, "annotation/guidelines.html")


@role_required(RESEARCHER)
def set_list(request: HttpRequest) -> HttpResponse:
    sets = list(ComparisonSet.objects.select_related("suite", "created_by"))
    progress = set_progress(sets)
    return render(request, "annotation/set_list.html", {"rows": [(c, progress[c.pk]) for c in sets]})


@role_required(RESEARCHER)
def set_detail(request: HttpRequest, name: str) -> HttpResponse:
    cset = get_object_or_404(ComparisonSet.objects.select_related("suite", "created_by"), name=name)
    pairs = cset.comparisons.order_by("position", "id").values(
        "pk", "position", "task_ref", "judgement_count", "locked_until"
    )[:500]
    context = {
        "cset": cset,
        "progress": set_progress([cset])[cset.pk],
        "pairs": pairs,
        "reviewers": reviewer_progress([cset]),
    }
    return render(request, "annotation/set_detail.html", context)


@role_required(RESEARCHER)
def set_new(request: HttpRequest) -> HttpResponse:
    suites = list(TaskSuite.objects.order_by("name").values_list("name", flat=True))
    form = ComparisonSetForm(request.POST or None, suites=suites)
    if request.method == "POST" and form.is_valid():
        try:
            cset = draw_pairs(form.request(), created_by=_user(request))
        except PairsError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("annotation:set", name=cset.name)
    status = 400 if request.method == "POST" else 200
    return render(request, "annotation/set_new.html", {"form": form}, status=status)
