"""Pages and actions of the reward service."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from core.permissions import role_required
from core.roles import RESEARCHER
from rewards.jobs import score_trajectory_job
from trajectories.models import Trajectory


@require_POST
@role_required(RESEARCHER)
def rescore(request: HttpRequest, trajectory_id: str) -> HttpResponse:
    """Score under the current reward spec (a no-op if this spec version already scored it)."""
    trajectory = get_object_or_404(Trajectory, trajectory_id=trajectory_id)
    if trajectory.task_id is None:
        raise Http404("This trajectory's task is not in the database, so it cannot be scored.")
    score_trajectory_job.delay(str(trajectory_id))
    return redirect("trajectories:detail", trajectory_id=trajectory_id)
