"""Pages for training runs: list and launch form, the run page (live charts), cancel, resume."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.pages import error_page
from core.permissions import role_required
from core.roles import RESEARCHER, has_role
from core.vocabulary import TrainingKind
from tasks.models import TaskSuite
from training.config import MAX_CONFIG_BYTES, ConfigError
from training.examples import example, examples
from training.models import TrainingRun
from training.run_compare import CompareError, overlay, parse_run_ids
from training.run_queries import (
    METRIC_PAGE,
    chart_rules,
    metric_groups,
    metric_rows,
    rollout_defaults,
    run_checkpoints,
    run_notices,
    runs,
)
from training.services import RunError, cancel_run, create_run, fail_lost_runs, is_resumable, live_group, resume_run


class LaunchForm(forms.Form):
    config = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 22, "cols": 90, "spellcheck": "false"}),
        max_length=MAX_CONFIG_BYTES,
        initial=example(TrainingKind.SFT),
        help_text="rl_config in YAML or JSON: kind, model, environment, rl, data, logging",
    )


def _list(
    request: HttpRequest,
    form: LaunchForm,
    errors: dict[str, str],
    status: int = 200,
    found: dict[str, str] | None = None,
) -> HttpResponse:
    fail_lost_runs()
    context = {"form": form, "runs": runs(), "errors": errors, "examples": found or examples()}
    return render(request, "training/run_list.html", context, status=status)


@role_required()
def run_list(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        # The first example names this installation's own data, where it has some.
        found = examples()
        return _list(request, LaunchForm(initial={"config": found[TrainingKind.SFT]}), {}, found=found)
    form = LaunchForm(request.POST)
    if not has_role(request.user, RESEARCHER):
        return _list(request, form, {"launch": "only researchers launch training runs"}, status=403)
    if not form.is_valid():
        return _list(request, form, {"config": " ".join(str(e) for e in form.errors["config"])}, status=400)
    try:
        run = create_run(form.cleaned_data["config"], request.user)
    except ConfigError as exc:
        return _list(request, form, exc.errors, status=400)
    except RunError as exc:
        return _list(request, form, {"data": str(exc)}, status=400)
    return redirect("training:run", run_id=run.pk)


@role_required()
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    fail_lost_runs(TrainingRun.objects.filter(pk=run_id))
    run = get_object_or_404(TrainingRun.objects.select_related("created_by", "resume_from"), pk=run_id)
    metrics = metric_rows(run)
    context = {
        "run": run,
        "live_group": live_group(run),
        "metrics": metrics,
        "metric_groups": metric_groups(metrics),
        "chart_rules": chart_rules(),
        "notices": run_notices(run, metrics),
        "checkpoints": run_checkpoints(run),
        "resumable": is_resumable(run),
        "suites": TaskSuite.objects.order_by("name").values_list("name", flat=True),
        "rollout": rollout_defaults(),
    }
    return render(request, "training/run_detail.html", context)


@role_required()
def run_metrics(request: HttpRequest, run_id: int) -> JsonResponse:
    """Metric rows after ?after=<step>: what a page missed while its socket was down."""
    run = get_object_or_404(TrainingRun, pk=run_id)
    try:
        after = int(request.GET.get("after", "0"))
    except ValueError:
        return JsonResponse({"error": "after must be an integer"}, status=400)
    rows = metric_rows(run, after=after)
    return JsonResponse({"status": run.status, "metrics": rows, "limit": METRIC_PAGE})


@require_POST
@role_required(RESEARCHER)
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(TrainingRun, pk=run_id)
    try:
        cancel_run(run, request.user)
    except RunError as exc:
        messages.error(request, str(exc))
    return redirect("training:run", run_id=run.pk)


@require_POST
@role_required(RESEARCHER)
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(TrainingRun, pk=run_id)
    try:
        resume_run(run, request.user)
    except RunError as exc:
        messages.error(request, str(exc))
    return redirect("training:run", run_id=run.pk)


@role_required()
def run_compare(request: HttpRequest) -> HttpResponse:
    """Runs overlaid: a chart per metric with a curve per run, and the config keys they differ in."""
    try:
        found = overlay(parse_run_ids(request.GET.getlist("runs") + request.GET.getlist("run")))
    except CompareError as exc:
        return error_page(request, str(exc), status=400, title="Cannot overlay these runs")
    return render(request, "training/run_compare.html", {"overlay": found, "chart_rules": chart_rules()})
