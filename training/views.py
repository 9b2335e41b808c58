"""Pages for training sets: freeze one from the trajectory list's filter, see it, export it."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.permissions import role_required
from core.roles import RESEARCHER
from training.curation import CurationError, CurationRule, build_training_set
from training.models import TrainingSet
from training.queries import export_filename, export_lines, member_rows, set_spec, training_sets
from trajectories.queries import TrajectoryFilter
from trajectories.views import trajectory_list_page


class TrainingSetForm(forms.Form):
    name = forms.SlugField(max_length=100, error_messages={"invalid": "Use only letters, digits, - and _ in the name."})
    query = forms.CharField(required=False, max_length=2000)
    successes_only = forms.BooleanField(required=False)
    max_duplicate_rate = forms.FloatField(required=False, min_value=0, max_value=1)
    per_task_limit = forms.IntegerField(required=False, min_value=1)
    require_discrimination = forms.BooleanField(required=False)
    size = forms.IntegerField(required=False, min_value=1)
    success_ratio = forms.FloatField(required=False, min_value=0, max_value=1)
    seed = forms.IntegerField(required=False)

    def rule(self) -> CurationRule:
        data = self.cleaned_data
        return CurationRule(
            query=_query_dict(data["query"]),
            successes_only=data["successes_only"],
            max_duplicate_rate=data["max_duplicate_rate"],
            per_task_limit=data["per_task_limit"],
            require_discrimination=data["require_discrimination"],
            size=data["size"],
            success_ratio=data["success_ratio"],
            seed=data["seed"] or 0,
        )


def _query_dict(query: str) -> dict[str, str]:
    # Only the list's own filters, non-empty: the rule records what actually chose the set.
    allowed = set(TrajectoryFilter.base_filters)
    params = QueryDict(query)
    return {k: str(params[k]) for k in params if k in allowed and params[k]}


@require_POST
@role_required(RESEARCHER)
def create_training_set(request: HttpRequest) -> HttpResponse:
    form = TrainingSetForm(request.POST)
    if form.is_valid():
        try:
            training_set = build_training_set(form.cleaned_data["name"], form.rule(), request.user)
        except CurationError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("training:set", name=training_set.name, version=training_set.version)
    # The form lives on the trajectory list: show that list again, for the filter it carried.
    return trajectory_list_page(request, QueryDict(request.POST.get("query", "")), curate=form, status=400)


@role_required()
def training_set_list(request: HttpRequest) -> HttpResponse:
    return render(request, "training/training_sets.html", {"sets": training_sets()})


@role_required()
def training_set_detail(request: HttpRequest, name: str, version: int) -> HttpResponse:
    training_set = get_object_or_404(TrainingSet, name=name, version=version)
    return render(
        request,
        "training/training_set.html",
        {"ts": training_set, "rows": member_rows(training_set), "spec_version": set_spec(training_set)},
    )


@role_required()
def training_set_export(request: HttpRequest, name: str, version: int) -> StreamingHttpResponse:
    training_set = get_object_or_404(TrainingSet, name=name, version=version)
    response = StreamingHttpResponse(export_lines(training_set), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{export_filename(training_set)}"'
    return response
