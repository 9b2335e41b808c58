"""Pages and actions of the reward service."""

from __future__ import annotations

from celery.result import AsyncResult
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.permissions import role_required
from core.roles import RESEARCHER
from rewards.bulk import start_scoring_run
from rewards.jobs import score_trajectory_job
from rewards.models import Reward, RewardCheck
from rewards.reward_checks import RewardCheckError, start_reward_check
from rewards.services import active_spec
from tasks.models import TaskSuite
from trajectories.models import RolloutBatch, Trajectory

# Celery's states, as the status line words them.
JOB_STATES = {"PENDING": "queued", "RECEIVED": "queued", "STARTED": "running", "RETRY": "queued"}


def _status(request: HttpRequest, trajectory: Trajectory, state: str, **extra: object) -> HttpResponse:
    return render(request, "rewards/_rescore_status.html", {"t": trajectory, "state": state, **extra})


@require_POST
@role_required(RESEARCHER)
def rescore(request: HttpRequest, trajectory_id: str) -> HttpResponse:
    """Score under the current reward spec in the background (a no-op if this spec version already scored it).

    From the page (htmx) the answer is a status line that the job's live events then move
    on: queued, running, the result. Without htmx, back to the page.
    """
    trajectory = get_object_or_404(Trajectory, trajectory_id=trajectory_id)
    if trajectory.task_id is None:
        raise Http404("This trajectory's task is not in the database, so it cannot be scored.")
    version = active_spec().version
    done = Reward.objects.filter(trajectory=trajectory, spec_version=version).first()
    if done is not None:
        # Saying so beats queueing a job that would only return the stored reward.
        if request.headers.get("HX-Request"):
            return _status(request, trajectory, "already", reward=done)
        return redirect("trajectories:detail", trajectory_id=trajectory_id)
    job = score_trajectory_job.delay(str(trajectory_id))
    if request.headers.get("HX-Request"):
        return _status(request, trajectory, "queued", job_id=getattr(job, "id", ""), spec_version=version)
    return redirect("trajectories:detail", trajectory_id=trajectory_id)


@require_POST
@role_required(RESEARCHER)
def score_batch(request: HttpRequest, batch_id: int) -> HttpResponse:
    """The batch page's "score them": a scoring run over the batch on a `rewards` worker (rewards.bulk)."""
    batch = get_object_or_404(RolloutBatch, pk=batch_id)
    run = start_scoring_run({"batch": batch.pk}, user=request.user)
    unscored = batch.trajectories.filter(status=Trajectory.Status.FINISHED, scored_at=None).count()
    messages.info(request, f"Scoring run {run.pk} queued: {unscored} unscored trajectories of this batch.")
    return redirect("batches:detail", batch_id=batch.pk)


@require_GET
@role_required(RESEARCHER)
def rescore_status(request: HttpRequest, trajectory_id: str, job_id: str) -> HttpResponse:
    """Where a scoring job is now, for a page that missed its live events (a reconnect)."""
    trajectory = get_object_or_404(Trajectory, trajectory_id=trajectory_id)
    result = AsyncResult(job_id)
    if result.state == "SUCCESS":
        reward = Reward.objects.filter(trajectory=trajectory).order_by("-created_at").first()
        return _status(request, trajectory, "succeeded", reward=reward)
    if result.state == "FAILURE":
        return _status(request, trajectory, "failed", error=" ".join(str(result.result).split())[:300])
    return _status(request, trajectory, JOB_STATES.get(result.state, "queued"), job_id=job_id)


@require_POST
@role_required(RESEARCHER)
def check_suite(request: HttpRequest, suite: str) -> HttpResponse:
    """Start the reward-gap check of the suite in the background; its page shows the check."""
    suite_obj = get_object_or_404(TaskSuite, name=suite)
    try:
        check = start_reward_check(suite_obj, request.user)
    except RewardCheckError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Reward check #{check.pk} queued for {check.total} task{'s' * (check.total != 1)}.")
    return redirect("tasks:suite-detail", suite=suite_obj.name)


@require_GET
@role_required()
def reward_check(request: HttpRequest, suite: str, check_id: int) -> HttpResponse:
    """The check's status line, which the suite page polls until the check is done."""
    check = get_object_or_404(RewardCheck.objects.select_related("suite"), pk=check_id, suite__name=suite)
    return render(request, "rewards/_reward_check.html", {"check": check, "suite": check.suite, "polled": True})
