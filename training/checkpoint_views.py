"""The checkpoint page: its lineage as a graph, data and code versions, metrics, what came of it."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from core.permissions import role_required
from tasks.models import TaskSuite
from training.checkpoint_queries import checkpoint_page_row, lineage, rollout_batches, runs_started_from
from training.checkpoint_sections import page_context
from training.run_queries import rollout_defaults


@role_required()
def checkpoint_detail(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = checkpoint_page_row(checkpoint_id).first()
    if checkpoint is None:
        raise Http404("No such checkpoint.")
    context = {
        "checkpoint": checkpoint,
        "lineage": lineage(checkpoint),
        "runs_from": runs_started_from(checkpoint),
        "batches": rollout_batches(checkpoint),
        "suites": TaskSuite.objects.order_by("name").values_list("name", flat=True),
        "rollout": rollout_defaults(),
        **page_context(checkpoint),
    }
    return render(request, "training/checkpoint_detail.html", context)
