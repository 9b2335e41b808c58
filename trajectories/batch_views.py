"""Pages for rollout batches: list and launch form, detail with live progress."""

from __future__ import annotations

from django import forms
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.limits import (
    MAX_STEPS_DEFAULT,
    MAX_STEPS_MAX,
    MAX_STEPS_MIN,
    SAMPLES_MAX,
    SAMPLES_MIN,
    TEMPERATURE_DEFAULT,
    TEMPERATURE_MAX,
    TEMPERATURE_MIN,
)
from core.pages import initial_from_query
from core.permissions import role_required
from core.roles import RESEARCHER, has_role
from core.vocabulary import ISOLATING_BACKENDS, LAUNCHABLE_POLICIES
from tasks.models import TaskSuite
from trajectories.batches import cancel_batch, check_policy_source, launch_from_form, resume_batch
from trajectories.events import BatchRow, BatchState, batch_live_group
from trajectories.models import RolloutBatch, Trajectory
from trajectories.progress import batch_counts, batch_metrics, distinct_errors, error_line
from trajectories.rollout_settings import RolloutError, RolloutSettings


class LaunchForm(forms.Form):
    suite = forms.ModelChoiceField(queryset=TaskSuite.objects.order_by("name"), to_field_name="name")
    policy = forms.ChoiceField(choices=[(p.value, p.value) for p in LAUNCHABLE_POLICIES])
    model = forms.CharField(required=False, max_length=300, help_text="model dir (hf) or model name (openai)")
    base_url = forms.CharField(required=False, max_length=300, help_text="OpenAI-compatible server (openai)")
    samples = forms.IntegerField(min_value=SAMPLES_MIN, max_value=SAMPLES_MAX, initial=1)
    temperature = forms.FloatField(min_value=TEMPERATURE_MIN, max_value=TEMPERATURE_MAX, initial=TEMPERATURE_DEFAULT)
    max_steps = forms.IntegerField(min_value=MAX_STEPS_MIN, max_value=MAX_STEPS_MAX, initial=MAX_STEPS_DEFAULT)
    sandbox = forms.ChoiceField(choices=[(b.value, b.value) for b in ISOLATING_BACKENDS])
    tasks = forms.CharField(
        required=False,
        max_length=4000,
        help_text="task ids, comma-separated (empty: every task of the suite)",
        widget=forms.TextInput(attrs={"placeholder": "all tasks"}),
    )

    def clean_tasks(self) -> list[str]:
        return list(dict.fromkeys(t.strip() for t in self.cleaned_data["tasks"].split(",") if t.strip()))

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("policy") and not self.errors:
            try:
                data["rollout"] = rollout = RolloutSettings.from_options(data)
            except RolloutError as exc:
                raise forms.ValidationError(str(exc)) from None
            # Checked before anything is queued: a missing model or a dead server is a form error,
            # not a batch of failed trajectories.
            try:
                check_policy_source(rollout)
            except RolloutError as exc:
                self.add_error("base_url" if rollout.policy_kind == "openai" else "model", str(exc))
        return data


def launch_initial(request: HttpRequest) -> dict[str, str]:
    """A launch form pre-filled from the query (the task page's "Roll out this task")."""
    return initial_from_query(request, ("suite", "tasks", "policy", "model"), 4000)


@role_required()
def batch_list(request: HttpRequest) -> HttpResponse:
    form = LaunchForm(request.POST or None, initial=launch_initial(request))
    if request.method == "POST":
        if not _may_launch(request):
            return render(request, "trajectories/batch_list.html", _list_context(form), status=403)
        if form.is_valid():
            data = form.cleaned_data
            try:
                batch = launch_from_form(data, request.user)
            except RolloutError as exc:
                form.add_error(None, str(exc))
            else:
                return redirect("batches:detail", batch_id=batch.pk)
        return render(request, "trajectories/batch_list.html", _list_context(form), status=400)
    return render(request, "trajectories/batch_list.html", _list_context(form))


def _may_launch(request: HttpRequest) -> bool:
    return has_role(request.user, RESEARCHER)


def _list_context(form: LaunchForm) -> dict[str, object]:
    return {"form": form, "batches": RolloutBatch.objects.select_related("suite")[:100]}


@role_required()
def batch_detail(request: HttpRequest, batch_id: int) -> HttpResponse:
    batch = get_object_or_404(RolloutBatch.objects.select_related("suite"), pk=batch_id)
    rows = batch.trajectories.order_by("task_ref", "sample_index").only(
        "trajectory_id",
        "task_ref",
        "sample_index",
        "status",
        "termination",
        "step_count",
        "final_reward",
        "success",
        "error",
    )
    trajectories = []
    for row in rows:
        row.error_line = error_line(row.error)  # type: ignore[attr-defined]
        trajectories.append(row)
    return render(
        request,
        "trajectories/batch_detail.html",
        {
            "batch": batch,
            "trajectories": trajectories,
            "metrics": batch_metrics(batch),
            "errors": distinct_errors(batch),
            "live_group": batch_live_group(batch.pk),
            "unscored": batch.trajectories.filter(status=Trajectory.Status.FINISHED, scored_at=None).count(),
        },
    )


@role_required()
def batch_state(request: HttpRequest, batch_id: int) -> JsonResponse:
    """What the batch page repaints from when its live socket comes back (static/js/batch.js)."""
    batch = get_object_or_404(RolloutBatch, pk=batch_id)
    rows: list[BatchRow] = [
        {
            "trajectory_id": str(trajectory_id),
            "status": status,
            "steps": steps,
            "termination": termination,
            "error": error_line(error),
        }
        for trajectory_id, status, steps, termination, error in batch.trajectories.order_by(
            "task_ref", "sample_index"
        ).values_list("trajectory_id", "status", "step_count", "termination", "error")
    ]
    state: BatchState = {"status": batch.status, "rows": rows, "errors": distinct_errors(batch), **batch_counts(batch)}
    return JsonResponse(state, headers={"Cache-Control": "no-store"})


@require_POST
@role_required(RESEARCHER)
def batch_cancel(request: HttpRequest, batch_id: int) -> HttpResponse:
    cancel_batch(get_object_or_404(RolloutBatch, pk=batch_id), request.user)
    return redirect("batches:detail", batch_id=batch_id)


@require_POST
@role_required(RESEARCHER)
def batch_resume(request: HttpRequest, batch_id: int) -> HttpResponse:
    resume_batch(get_object_or_404(RolloutBatch, pk=batch_id), user=request.user)
    return redirect("batches:detail", batch_id=batch_id)


@role_required()
def batch_group(request: HttpRequest, batch_id: int, task_id: str) -> HttpResponse:
    """Every rollout of one task in a batch, side by side: the GRPO group, where hacking shows."""
    batch = get_object_or_404(RolloutBatch.objects.select_related("suite"), pk=batch_id)
    group = list(batch.trajectories.filter(task_ref=task_id).order_by("sample_index"))
    if not group:
        raise Http404("No rollouts of that task in this batch.")
    rewards = [t.final_reward for t in group if t.final_reward is not None]
    return render(
        request,
        "trajectories/batch_group.html",
        {
            "batch": batch,
            "task_id": task_id,
            "group": group,
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,
            "distinct_patches": len({t.patch for t in group}),
        },
    )
