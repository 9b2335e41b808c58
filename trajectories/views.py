from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.forms import Form
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.permissions import role_required
from core.roles import RESEARCHER
from core.vocabulary import ActionType
from trajectories.api import STEP_MAX
from trajectories.archive import ensure_steps
from trajectories.events import trajectory_live_group
from trajectories.interchange.subagents import delegation
from trajectories.jobs import replay_trajectory_job
from trajectories.models import SavedFilter, Step, Trajectory
from trajectories.queries import (
    OBSERVATION_HEAD,
    STEP_CHUNK,
    STEP_MORE,
    FlagAtStep,
    flags_at_steps,
    neighbours,
    step_chunk,
    step_timeline,
)
from trajectories.queries import trajectory_detail as get_trajectory
from trajectories.queries import trajectory_list as list_trajectories
from trajectories.replay import start_replay
from trajectories.sections import Slot, page_context
from trajectories.step_filters import ANY_FLAG, SEARCH_MAX, StepFilter, StepFilterForm

PAGE_SIZE = 50


@role_required()
def trajectory_list(request: HttpRequest) -> HttpResponse:
    return trajectory_list_page(request, request.GET)


def trajectory_list_page(
    request: HttpRequest, params: QueryDict, *, curate: Form | None = None, status: int = 200
) -> HttpResponse:
    """The list for `params`; `curate` is a refused training-set form to show again beside its fields."""
    qs, flt = list_trajectories({key: str(params[key]) for key in params})
    # Keyset paging on (created_at, id): stable while new rows arrive and cheap deep
    # into a large table, unlike OFFSET.
    before = params.get("before", "")
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
    query = params.copy()
    query.pop("before", None)
    saved = SavedFilter.objects.filter(owner=request.user) if request.user.is_authenticated else []
    context = {
        "trajectories": rows,
        "filter": flt,
        "next_before": next_before,
        "query": query.urlencode(),
        "saved_filters": saved,
        "curate": curate,
    }
    template = "trajectories/_rows.html" if request.headers.get("HX-Request") else "trajectories/list.html"
    return render(request, template, context, status=status)


def _step_number(value: str | None) -> int | None:
    """A step number from the query string, bounded to just outside the column's range (SQLite
    cannot even bind an integer past 64 bits); None when absent or not a number."""
    try:
        return min(max(int(value or ""), -1), STEP_MAX)
    except ValueError:
        return None


def _step_filter(request: HttpRequest) -> tuple[StepFilter, list[str]]:
    """The page's step filters from the query string, or none and what is wrong with them."""
    form = StepFilterForm(request.GET)
    if form.is_valid():
        return form.step_filter(), []
    return StepFilter(), form.problems()


def _chunk_context(
    trajectory: Trajectory,
    steps: list[Step],
    flags: dict[int, list[FlagAtStep]],
    only: StepFilter,
    *,
    earlier_before: int | None,
    later_after: int | None,
) -> dict[str, object]:
    """What `_steps.html` needs for a chunk of steps: the steps with the flags they earned, where
    the chunks before and after it start (None where the trajectory ends), and the filters."""
    for step in steps:
        step.flags_here = flags.get(step.step, [])  # type: ignore[attr-defined]
    return {
        "t": trajectory,
        "steps": steps,
        "head_limit": OBSERVATION_HEAD,
        "earlier_before": earlier_before,
        "later_after": later_after,
        "earlier_from": max(earlier_before - STEP_CHUNK, 0) if earlier_before is not None else 0,
        "step_filter": only,
        "filter_query": only.query(),
    }


@role_required()
def trajectory_detail(request: HttpRequest, trajectory_id: str) -> HttpResponse:
    try:
        trajectory = get_trajectory(trajectory_id)
    except Trajectory.DoesNotExist:
        raise Http404("No such trajectory.") from None
    ensure_steps(trajectory)  # an archived batch comes back from the object store first
    only, problems = _step_filter(request)
    flags = flags_at_steps(trajectory)
    # Every step has a tick on the timeline, but only the first chunk is rendered (from ?from=N,
    # where a tick links): the page's work is the same at 10 steps and at 10,000, and the rest
    # comes from trajectory_steps as the reader scrolls.
    timeline = step_timeline(trajectory)
    start = _step_number(request.GET.get("from"))
    if start is not None and timeline:
        start = min(start, timeline[-1][0])
    steps, later = step_chunk(trajectory, after=-1 if start is None else start - 1, only=only, flagged=flags)
    if only.active:
        # Matching steps may lie before the one the page opens at, however far before.
        earlier = start if start is not None and timeline and start > timeline[0][0] else None
    else:
        earlier = steps[0].step if steps and steps[0].step > timeline[0][0] else None
    previous_id, next_id = neighbours(trajectory)
    tools = Counter(action for _, action, _ in timeline)
    return render(
        request,
        "trajectories/detail.html",
        {
            **page_context(trajectory),
            **_chunk_context(trajectory, steps, flags, only, earlier_before=earlier, later_after=later),
            "timeline": timeline,
            "live_group": trajectory_live_group(trajectory.trajectory_id),
            "patch_flags": [f for f in trajectory.flags if isinstance(f, dict) and not isinstance(f.get("step"), int)],
            "flagged_steps": sorted(flags),
            "tool_counts": [(a.value, tools[a.value]) for a in ActionType if tools[a.value] or a.value == only.tool],
            "flag_detectors": sorted(
                {f.detector for here in flags.values() for f in here} | ({only.flag} - {"", ANY_FLAG})
            ),
            "any_flag": ANY_FLAG,
            "search_max": SEARCH_MAX,
            "filter_problems": problems,
            "previous_id": previous_id,
            "next_id": next_id,
            **delegation(trajectory),
        },
        status=400 if problems else 200,
    )


@role_required()
def trajectory_steps(request: HttpRequest, trajectory_id: str) -> HttpResponse:
    """The next chunk of the page's steps (?after=N) or the one before (?before=N), with the page's
    filters, rendered by the page's own template, so text loaded on demand is escaped as the
    first screenful is."""
    trajectory = get_object_or_404(Trajectory.objects.select_related("task", "suite"), trajectory_id=trajectory_id)
    only, problems = _step_filter(request)
    if problems:
        # Read as the page reads a chunk (an <ol> of items), so the reason shows where steps would.
        context = {
            "t": trajectory,
            "steps": [],
            "earlier_before": None,
            "later_after": None,
            "filter_problems": problems,
        }
        return render(request, "trajectories/_step_chunk.html", context, status=400)
    ensure_steps(trajectory)
    flags = flags_at_steps(trajectory)
    before = _step_number(request.GET.get("before"))
    if before is not None:
        steps, earlier = step_chunk(trajectory, before=before, limit=STEP_MORE, only=only, flagged=flags)
        context = _chunk_context(trajectory, steps, flags, only, earlier_before=earlier, later_after=None)
    else:
        after = _step_number(request.GET.get("after"))
        steps, later = step_chunk(
            trajectory, after=-1 if after is None else after, limit=STEP_MORE, only=only, flagged=flags
        )
        context = _chunk_context(trajectory, steps, flags, only, earlier_before=None, later_after=later)
    return render(request, "trajectories/_step_chunk.html", {**page_context(trajectory, slots=[Slot.STEP]), **context})


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
