from __future__ import annotations

from datetime import datetime

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.permissions import role_required
from core.roles import RESEARCHER
from trajectories.archive import ensure_steps
from trajectories.events import trajectory_live_group
from trajectories.jobs import replay_trajectory_job
from trajectories.models import SavedFilter, Trajectory
from trajectories.queries import OBSERVATION_HEAD, STEP_PAGE, neighbours, step_page, step_timeline
from trajectories.queries import trajectory_detail as get_trajectory
from trajectories.queries import trajectory_list as list_trajectories
from trajectories.replay import start_replay
from trajectories.sections import page_context

PAGE_SIZE = 50


@role_required()
def trajectory_list(request: HttpRequest) -> HttpResponse:
    qs, flt = list_trajectories(request.GET.dict())
    # Keyset paging on (created_at, id): stable while new rows arrive and cheap deep
    # into a large table, unlike OFFSET.
    before = request.GET.get("before", "")
    if before:
        try:
            stamp, _, pk = before.rpartition("_")
            qs = qs.filter(created_at__lte=datetime.fromisoformat(stamp)).exclude(
                created_at=datetime.fromisoformat(stamp), id__gte=int(pk)
            )
        except ValueError:
            qs = qs.none()
    rows = list(qs[: PAGE_SIZE + 1])
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    next_before = f"{rows[-1].created_at.isoformat()}_{rows[-1].pk}" if more else ""
    query = request.GET.copy()
    query.pop("before", None)
    saved = SavedFilter.objects.filter(owner=request.user) if request.user.is_authenticated else []
    context = {
        "trajectories": rows,
        "filter": flt,
        "next_before": next_before,
        "query": query.urlencode(),
        "saved_filters": saved,
    }
    template = "trajectories/_rows.html" if request.headers.get("HX-Request") else "trajectories/list.html"
    return render(request, template, context)


@role_required()
def trajectory_detail(request: HttpRequest, trajectory_id: str) -> HttpResponse:
    try:
        trajectory = get_trajectory(trajectory_id)
    except Trajectory.DoesNotExist:
        raise Http404("No such trajectory.") from None
    ensure_steps(trajectory)  # an archived batch comes back from the object store first
    timeline = step_timeline(trajectory)
    pages = max(1, -(-len(timeline) // STEP_PAGE))
    try:
        page = min(max(1, int(request.GET.get("page", "1"))), pages)
    except ValueError:
        page = 1
    previous_id, next_id = neighbours(trajectory)
    flags = [f for f in trajectory.flags if isinstance(f, dict)]
    step_flags: dict[int, list[dict[str, object]]] = {}
    for flag in flags:
        if isinstance(flag.get("step"), int):
            step_flags.setdefault(flag["step"], []).append(flag)
    steps = step_page(trajectory, page)
    for step in steps:
        step.flags_here = step_flags.get(step.step, [])  # type: ignore[attr-defined]
    ticks = [
        (number, action, reward, index // STEP_PAGE + 1) for index, (number, action, reward) in enumerate(timeline)
    ]
    return render(
        request,
        "trajectories/detail.html",
        {
            **page_context(trajectory),
            "t": trajectory,
            "steps": steps,
            "timeline": ticks,
            "live_group": trajectory_live_group(trajectory.trajectory_id),
            "patch_flags": [f for f in flags if not isinstance(f.get("step"), int)],
            "page": page,
            "pages": pages,
            "head_limit": OBSERVATION_HEAD,
            "previous_id": previous_id,
            "next_id": next_id,
            "page_numbers": range(1, pages + 1),
        },
    )


@require_POST
@role_required(RESEARCHER)
def replay(request: HttpRequest, trajectory_id: str) -> HttpResponse:
    trajectory = get_object_or_404(Trajectory, trajectory_id=trajectory_id)
    if trajectory.task_id is None:
        raise Http404("This trajectory's task is not in the database, so it cannot be replayed.")
    start_replay(trajectory)
    replay_trajectory_job.delay(str(trajectory_id))
    if request.headers.get("HX-Request"):
        # The page swaps in the progress bar; the job's live events move it on to the result.
        trajectory.refresh_from_db(fields=["replay_report"])
        return render(request, "trajectories/_replay_report.html", {"t": trajectory})
    return redirect("trajectories:detail", trajectory_id=trajectory_id)
