from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from core.pages import error_page, initial_from_query
from core.permissions import role_required
from core.roles import RESEARCHER, has_role
from core.vocabulary import CheckpointKind
from evaluation.diagnosis import PASS_MOVE, correlations, diagnose, pass_trend
from evaluation.forms import EvalRunForm
from evaluation.health import health_rows
from evaluation.metrics import sign_test
from evaluation.models import EvalRun
from evaluation.queries import checkpoint_evals, eval_runs, per_task_rates, reward_curve
from evaluation.services import EvalError, cheat_trajectories, progress, refresh_eval
from training.models import TrainingRun

RUNS_SHOWN = 200


@role_required()
def eval_list(request: HttpRequest) -> HttpResponse:
    can_research = has_role(request.user, RESEARCHER)
    # A checkpoint page's "Evaluate this checkpoint" links here with ?checkpoint=ID.
    form = EvalRunForm(request.POST or None, initial=initial_from_query(request, ("checkpoint", "suite"), 200))
    if request.method == "POST":
        if not can_research:
            return error_page(request, "Launching an evaluation needs the researcher role.", status=403)
        if form.is_valid():
            try:
                run = form.launch(request.user)
            except EvalError as exc:
                form.add_error(None, str(exc))
            else:
                return redirect("evaluation:detail", run.pk)
    # A run launched here is sampled and scored by workers; it is finished when someone looks.
    runs = [refresh_eval(r) if r.status == EvalRun.Status.RUNNING else r for r in eval_runs()[:RUNS_SHOWN]]
    training_runs = TrainingRun.objects.filter(checkpoints__eval_runs__isnull=False).distinct()[:50]
    return render(
        request,
        "evaluation/list.html",
        {"runs": runs, "form": form, "can_research": can_research, "training_runs": training_runs},
        status=400 if request.method == "POST" else 200,
    )


@role_required()
def eval_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = refresh_eval(get_object_or_404(eval_runs(), pk=run_id))
    tasks = per_task_rates(run) if run.results else {}
    others = eval_runs().filter(suite=run.suite, status=EvalRun.Status.SUCCEEDED).exclude(pk=run.pk)[:50]
    return render(
        request,
        "evaluation/detail.html",
        {
            "run": run,
            "counts": progress(run),
            "tasks": sorted(tasks.items()),
            "ks": [(str(k), k) for k in run.k_values],
            "cheats": cheat_trajectories(run) if run.results else [],
            "others": others,
        },
    )


@role_required()
def compare(request: HttpRequest) -> HttpResponse:
    """Two eval runs on one suite: per-task wins and losses, and an exact sign test."""
    try:
        a_id, b_id = int(request.GET.get("a", "")), int(request.GET.get("b", ""))
    except ValueError:
        return error_page(request, "Choose two evaluation runs to compare (?a=ID&b=ID).", status=400)
    a = refresh_eval(get_object_or_404(eval_runs(), pk=a_id))
    b = refresh_eval(get_object_or_404(eval_runs(), pk=b_id))
    if a.suite_id != b.suite_id:
        return error_page(request, "The two evaluation runs must be on the same suite.", status=400)
    if not (a.results and b.results):
        return error_page(request, "Both evaluation runs must have finished.", status=400)
    rates_a, rates_b = per_task_rates(a), per_task_rates(b)
    shared = sorted(set(rates_a) & set(rates_b))
    rows: list[dict[str, Any]] = []
    for task_id in shared:
        ra, rb = rates_a[task_id]["rate"], rates_b[task_id]["rate"]
        outcome = "win" if ra > rb else ("loss" if ra < rb else "tie")
        rows.append({"task_id": task_id, "a": rates_a[task_id], "b": rates_b[task_id], "outcome": outcome})
    test = sign_test([rates_a[t]["rate"] for t in shared], [rates_b[t]["rate"] for t in shared])
    return render(request, "evaluation/compare.html", {"a": a, "b": b, "rows": rows, "test": test})


@role_required()
def reward_vs_pass(request: HttpRequest, run_id: int) -> HttpResponse:
    """Reward vs pass@k for one training run: its reward curve beside pass@k of its checkpoints."""
    run = get_object_or_404(TrainingRun, pk=run_id)
    k_text = request.GET.get("k", "")
    k = int(k_text) if k_text.isdigit() and int(k_text) > 0 else None
    reward = reward_curve(run)
    evals = checkpoint_evals(run, k)
    points = [point for point, _ in evals]
    chart = {
        "reward": {"x": [s for s, _ in reward], "y": [v for _, v in reward]},
        "pass": {"x": [p.step for p in points], "y": [p.value for p in points]},
        "k": k or (min(evals[0][1].k_values) if evals else 1),
    }
    return render(
        request,
        "evaluation/reward_vs_pass.html",
        {
            "run": run,
            "evals": evals,
            "chart": chart,
            "correlation": correlations(reward, points),
            "diagnoses": diagnose(reward, points),
            "trend": pass_trend(points),
            "pass_move": PASS_MOVE,
            "forced": [e for _, e in evals if e.forced],
            "checkpoints": run.checkpoints.filter(kind=CheckpointKind.POLICY).order_by("step", "id"),
        },
    )


@role_required()
def health(request: HttpRequest) -> HttpResponse:
    rows = health_rows()
    return render(request, "evaluation/health.html", {"rows": rows, "alerts": sum(r["alert"] for r in rows)})
