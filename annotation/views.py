"""Pages that record reviewers' step labels, review marks and flag clearings; htmx swaps the partials they render."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.db.models import prefetch_related_objects
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from annotation.marked import SHOWS, marked_trajectories, rows
from annotation.queries import flag_review, labels_prefetch, review_marks
from annotation.services import AnnotationError, clear_flags, label_step, mark_for_review
from core.permissions import role_required
from trajectories.models import Step, Trajectory


@require_POST
@role_required()
def add_step_label(request: HttpRequest, trajectory_id: str, number: int) -> HttpResponse:
    step = get_object_or_404(
        Step.objects.select_related("trajectory"), trajectory__trajectory_id=trajectory_id, step=number
    )
    assert isinstance(request.user, User)
    status = 200
    error = ""
    try:
        label_step(request.user, step, request.POST.get("label", ""), request.POST.get("comment", ""))
    except AnnotationError as exc:
        error, status = str(exc), 400
    prefetch_related_objects([step], labels_prefetch())
    return render(
        request, "annotation/_step_labels.html", {"s": step, "error": error, "t": step.trajectory}, status=status
    )


@require_POST
@role_required()
def add_review_mark(request: HttpRequest, trajectory_id: str) -> HttpResponse:
    trajectory = get_object_or_404(Trajectory, trajectory_id=trajectory_id)
    assert isinstance(request.user, User)
    status = 200
    error = ""
    try:
        mark_for_review(request.user, trajectory, request.POST.get("note", ""))
    except AnnotationError as exc:
        error, status = str(exc), 400
    context = {"review_marks": review_marks(trajectory), "t": trajectory, "error": error}
    return render(request, "annotation/_review_marks.html", context, status=status)


@require_POST
@role_required()
def clear_trajectory_flags(request: HttpRequest, trajectory_id: str) -> HttpResponse:
    trajectory = get_object_or_404(Trajectory, trajectory_id=trajectory_id)
    assert isinstance(request.user, User)
    status = 200
    error = ""
    try:
        clear_flags(request.user, trajectory, request.POST.getlist("flag"), request.POST.get("reason", ""))
    except AnnotationError as exc:
        error, status = str(exc), 400
    trajectory.refresh_from_db(fields=["flags", "scored_spec", "scored_at"])
    context = {**flag_review(trajectory), "t": trajectory, "error": error}
    return render(request, "annotation/_flag_clearances.html", context, status=status)


QUEUE_PAGE = 50


@role_required()
def marked(request: HttpRequest) -> HttpResponse:
    """Trajectories marked for review or with flags nobody has cleared."""
    show = request.GET.get("show", "all")
    if show not in SHOWS:
        show = "all"
    page = Paginator(marked_trajectories(show), QUEUE_PAGE).get_page(request.GET.get("page"))  # type: ignore[arg-type]
    context = {"rows": rows(list(page.object_list)), "page": page, "show": show, "shows": SHOWS}
    return render(request, "annotation/marked.html", context)
