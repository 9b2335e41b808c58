"""The transcript page of one trajectory, the exact request behind one step, and two tries
at the same task side by side."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.pages import error_page
from core.permissions import role_required
from trajectories.models import Trajectory
from trajectories.transcript import TranscriptError, build_transcript, request_messages

OTHER_TRIES = 50  # trajectories of the same task offered to compare with


def _trajectory(trajectory_id: str) -> Trajectory:
    try:
        return Trajectory.objects.select_related("task", "task__suite").get(trajectory_id=trajectory_id)
    except (Trajectory.DoesNotExist, ValueError, ValidationError):
        raise Http404("No such trajectory.") from None


def _page(request: HttpRequest) -> int:
    try:
        return int(request.GET.get("page", "1"))
    except ValueError:
        return 1


@require_GET
@role_required()
def transcript(request: HttpRequest, trajectory_id: str) -> HttpResponse:
    trajectory = _trajectory(trajectory_id)
    return render(request, "trajectories/transcript.html", {"tr": build_transcript(trajectory, _page(request))})


@require_GET
@role_required()
def step_request(request: HttpRequest, trajectory_id: str, number: int) -> HttpResponse:
    """The messages the policy was sent for this step's reply, as JSON (never rendered as HTML)."""
    trajectory = _trajectory(trajectory_id)
    try:
        messages = request_messages(trajectory, number)
    except TranscriptError as exc:
        raise Http404(str(exc)) from None
    return JsonResponse({"trajectory_id": str(trajectory.trajectory_id), "step": number, "messages": messages})


@require_GET
@role_required()
def compare(request: HttpRequest) -> HttpResponse:
    """Two trajectories of one task, transcript beside transcript; with only `a`, a list to pick `b` from."""
    if not request.GET.get("a"):
        return error_page(request, "Say which trajectory to start from: /trajectories/compare/?a=ID&b=ID", status=400)
    a = _trajectory(request.GET["a"])
    others = (
        Trajectory.objects.filter(task_ref=a.task_ref)
        .exclude(pk=a.pk)
        .order_by("-created_at", "-pk")
        .only("trajectory_id", "policy_kind", "policy_model", "final_reward", "success", "step_count", "created_at")[
            :OTHER_TRIES
        ]
    )
    context: dict[str, object] = {"a": a, "others": others}
    if request.GET.get("b"):
        b = _trajectory(request.GET["b"])
        if b.task_ref != a.task_ref:
            context["error"] = (
                f"These are tries at different tasks ({a.task_ref} and {b.task_ref}); "
                "compare two tries at the same task."
            )
            return render(request, "trajectories/compare.html", context, status=400)
        page = _page(request)
        context.update(b=b, left=build_transcript(a, page), right=build_transcript(b, page))
    return render(request, "trajectories/compare.html", context)
