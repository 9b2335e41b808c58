"""Pages for curation: build a training set from the list's filter, see it, export it."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from trajectories.curation import CurationError, CurationRule, build_training_set
from trajectories.exports import iter_trajectory_lines
from trajectories.models import SavedFilter, TrainingSet, Trajectory
from trajectories.queries import TrajectoryFilter
from core.permissions import role_required
from core.roles import RESEARCHER


class TrainingSetForm(forms.Form):
    name = forms.SlugField(max_length=100)
    query = forms.CharField(required=False, max_length=2000)
    successes_only = forms.BooleanField(required=False)
    max_duplicate_rate = forms.FloatField(required=False, min_value=0, max_value=1)
    per_task_limit = forms.IntegerField(required=False, min_value=1)
    require_discrimination = forms.BooleanField(required=False)
    size = forms.IntegerField(required=False, min_value=1)
    success_ratio = forms.FloatField(required=False, min_value=0, max_value=1)
    seed = forms.IntegerField(required=False)


def _query_dict(query: str) -> dict[str, str]:
    from django.http import QueryDict

    allowed = set(TrajectoryFilter.base_filters)
    params = QueryDict(query)
    return {k: str(params[k]) for k in params if k in allowed and params[k]}


@require_POST
@role_required(RESEARCHER)
def create_training_set(request: HttpRequest) -> HttpResponse:
    form = TrainingSetForm(request.POST)
    if not form.is_valid():
        return HttpResponse(f"bad training set: {form.errors.as_text()}", status=400, content_type="text/plain")
    data = form.cleaned_data
    rule = CurationRule(query=_query_dict(data["query"]), successes_only=data["successes_only"],
                        max_duplicate_rate=data["max_duplicate_rate"], per_task_limit=data["per_task_limit"],
                        require_discrimination=data["require_discrimination"], size=data["size"],
                        success_ratio=data["success_ratio"], seed=data["seed"] or 0)
    try:
        training_set = build_training_set(data["name"], rule, request.user)
    except CurationError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    return redirect("trajectories:training-set", name=training_set.name, version=training_set.version)


@role_required()
def training_set_list(request: HttpRequest) -> HttpResponse:
    return render(request, "trajectories/training_sets.html", {"sets": TrainingSet.objects.all()[:200]})


@role_required()
def training_set_detail(request: HttpRequest, name: str, version: int) -> HttpResponse:
    training_set = get_object_or_404(TrainingSet, name=name, version=version)
    rows = Trajectory.objects.filter(trajectory_id__in=training_set.trajectory_ids[:500]).only(
        "trajectory_id", "task_ref", "success", "final_reward", "step_count", "duplicate_rate")
    return render(request, "trajectories/training_set.html", {"ts": training_set, "rows": rows})


@role_required()
def training_set_export(request: HttpRequest, name: str, version: int) -> StreamingHttpResponse:
    training_set = get_object_or_404(TrainingSet, name=name, version=version)
    lines = iter_trajectory_lines(Trajectory.objects.filter(trajectory_id__in=training_set.trajectory_ids))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{training_set.name}-v{training_set.version}.jsonl"'
    return response


@require_POST
@role_required()
def save_filter(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()[:100]
    query = request.POST.get("query", "")[:2000]
    if not name:
        return HttpResponse("a saved filter needs a name", status=400, content_type="text/plain")
    SavedFilter.objects.update_or_create(owner=request.user, name=name, defaults={"query": query})  # type: ignore[misc]
    return redirect(f"/trajectories/?{query}")
