"""Pages of the pairwise comparison queue: the queue, the review screen, guidelines, and the
researchers' pages that draw and inspect comparison sets."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.bulk import BulkError, release, reserve, set_priority
from annotation.forms import SCREEN_CHOICES, BulkForm, ComparisonSetForm, JudgementForm
from annotation.models import Assignment, Comparison, ComparisonSet
from annotation.pair_display import blind_pair, cached_diff_html, highlighted_diff_html, plain_diff_html
from annotation.pairs import PairsError, draw_pairs
from annotation.queue import (
    QueueError,
    claim,
    judge,
    next_for,
    queue_position,
    remaining_for,
    reviewer_progress,
    set_progress,
    skip,
    to_pair_terms,
    undo_judgement,
    undoable,
)
from core.permissions import role_required
from core.roles import RESEARCHER, has_role
from tasks.models import TaskSuite
from trajectories.models import Trajectory

# Session keys. The tasks whose statement this reviewer has read: a set holds several pairs of
# one task, and after the first the statement is folded so that both patches fit the first view.
READ_TASKS = "annotation:read-tasks"
READ_TASKS_KEPT = 200
# A verdict just undone, offered again on its pair's form (the row itself is gone).
UNDONE = "annotation:undone"
SCREEN_LABELS = dict(SCREEN_CHOICES)


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


def _undo_offer(user: User, cset: ComparisonSet) -> dict[str, object] | None:
    """The reviewer's last verdict in this set, in screen terms, when it can still be undone."""
    last = undoable(user, cset)
    if last is None:
        return None
    return {"pair": last.comparison_id, "choice": SCREEN_LABELS[to_pair_terms(last.choice, last.swapped)]}


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
    done = next((c for c in sets if c.name == done_set), None)
    undo = _undo_offer(user, done) if done is not None else None
    return render(
        request,
        "annotation/queue.html",
        {"rows": rows, "everyone": everyone, "can_research": researcher, "done_set": done_set, "undo": undo},
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
    return _review(request, assignment, JudgementForm(initial=_undone(request, comparison.pk)))


def _review(request: HttpRequest, assignment: Assignment, form: JudgementForm, status: int = 200) -> HttpResponse:
    pair = blind_pair(assignment)
    cset = assignment.comparison.comparison_set
    user = _user(request)
    context = {
        "pair": pair,
        "form": form,
        "left": _diff(pair["left"]["patch"]),
        "right": _diff(pair["right"]["patch"]),
        "cset": cset,
        "position": queue_position(user, cset),
        "statement_open": _first_read(request, pair["task_id"]),
        "undo": _undo_offer(user, cset),
    }
    return render(request, "annotation/compare.html", context, status=status)


def _first_read(request: HttpRequest, task_ref: str) -> bool:
    read = request.session.get(READ_TASKS, [])
    if task_ref in read:
        return False
    request.session[READ_TASKS] = [*read, task_ref][-READ_TASKS_KEPT:]
    return True


def _undone(request: HttpRequest, pk: int) -> dict[str, object] | None:
    undone = request.session.get(UNDONE)
    if not isinstance(undone, dict) or undone.get("pair") != pk:
        return None
    del request.session[UNDONE]
    return {name: undone[name] for name in ("choice", "reason", "tags")}


def _diff(patch: str) -> dict[str, object]:
    # Highlighting is slow (see annotation.pair_display): the page shows it only when cached,
    # else the plain diff, which the highlighted one replaces when its own request answers.
    cached = cached_diff_html(patch)
    return {"diff": cached if cached is not None else plain_diff_html(patch), "highlighted": cached is not None}


def _unavailable(
    request: HttpRequest, comparison: Comparison, message: str, heading: str = "This pair is not yours to judge"
) -> HttpResponse:
    context = {"message": message, "heading": heading, "cset": comparison.comparison_set}
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


@require_POST
@role_required()
def undo_verdict(request: HttpRequest, pk: int) -> HttpResponse:
    """Take back the reviewer's last verdict (on pair `pk`) and show that pair again, filled in."""
    comparison = get_object_or_404(Comparison.objects.select_related("comparison_set"), pk=pk)
    try:
        undone = undo_judgement(_user(request), comparison)
    except QueueError as exc:
        return _unavailable(request, comparison, str(exc), heading="This verdict cannot be undone")
    request.session[UNDONE] = {
        "pair": comparison.pk,
        "choice": to_pair_terms(undone.choice, undone.swapped),
        "reason": undone.reason,
        "tags": list(undone.tags),
    }
    return redirect("annotation:compare", pk=comparison.pk)


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
    return _set_page(request, cset, BulkForm())


def _set_page(request: HttpRequest, cset: ComparisonSet, bulk: BulkForm, status: int = 200) -> HttpResponse:
    pairs = cset.comparisons.order_by("-priority", "position", "id").values(
        "pk", "position", "task_ref", "judgement_count", "locked_until", "priority", "reserved_for__username"
    )[:500]
    context = {
        "cset": cset,
        "progress": set_progress([cset])[cset.pk],
        "pairs": pairs,
        "reviewers": reviewer_progress([cset]),
        "bulk": bulk,
    }
    return render(request, "annotation/set_detail.html", context, status=status)


@role_required(RESEARCHER)
@require_POST
def set_bulk(request: HttpRequest, name: str) -> HttpResponse:
    """Serve some pairs first, reserve some for one reviewer, or release reservations."""
    cset = get_object_or_404(ComparisonSet, name=name)
    form = BulkForm(request.POST)
    if not form.is_valid():
        return _set_page(request, cset, form, status=400)
    data = form.cleaned_data
    try:
        done = _bulk(cset, data)
    except BulkError as exc:
        form.add_error(exc.field, str(exc))
        return _set_page(request, cset, form, status=400)
    messages.success(request, done)
    return redirect("annotation:set", name=cset.name)


def _bulk(cset: ComparisonSet, data: dict[str, Any]) -> str:
    task = data["task"].strip()
    reviewer = None
    if data["reviewer"]:
        reviewer = User.objects.filter(username=data["reviewer"]).first()
        if reviewer is None:
            raise BulkError("reviewer", f"no user {data['reviewer'][:60]!r}")
    if data["action"] == "priority":
        return f"{set_priority(cset, data['priority'], task)} open pairs now have priority {data['priority']}"
    if data["action"] == "reserve":
        assert reviewer is not None  # the form requires one
        return f"{reserve(cset, reviewer, data['count'], task)} pairs reserved for {reviewer.username}"
    return f"{release(cset, reviewer)} reserved pairs released to every reviewer"


@role_required(RESEARCHER)
def set_new(request: HttpRequest) -> HttpResponse:
    suites = list(TaskSuite.objects.order_by("name").values_list("name", flat=True))
    form = ComparisonSetForm(request.POST or None, suites=suites)
    if request.method == "POST" and form.is_valid():
        try:
            cset = draw_pairs(form.request(), created_by=_user(request))
        except PairsError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            return redirect("annotation:set", name=cset.name)
    status = 400 if request.method == "POST" else 200
    return render(request, "annotation/set_new.html", {"form": form}, status=status)
