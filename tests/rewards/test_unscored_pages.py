"""Lost or failed scoring is visible and can be redone from the pages: the batch page counts what is not
scored and offers to score it; the trajectory page says why scoring failed and offers a retry."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from rewards.jobs import score_trajectory_job
from rewards.models import ScoringFailure, ScoringRun
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, client_for
from trajectories.batches import start_batch
from trajectories.models import Trajectory
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory

pytestmark = pytest.mark.django_db


def finished_unscored() -> Trajectory:
    import_task_dirs(DEMO / "tasks" / "task_0001", "unscored")
    batch = start_batch(TaskSuite.objects.get(name="unscored"), RolloutSettings("scripted"), enqueue=False)
    trajectory = run_trajectory(batch.trajectories.get().pk)
    assert trajectory is not None and trajectory.status == "finished" and trajectory.scored_at is None
    return trajectory


def test_the_batch_page_counts_unscored_trajectories_and_scores_them_on_request(
    researcher: User, reviewer: User
) -> None:
    trajectory = finished_unscored()
    assert trajectory.batch is not None
    page = client_for(researcher).get(f"/batches/{trajectory.batch.pk}/").content.decode()
    assert "<b>1</b> finished trajectory not scored" in page and "score them" in page
    # A reviewer sees the count, not the button.
    assert "score them</button>" not in client_for(reviewer).get(f"/batches/{trajectory.batch.pk}/").content.decode()
    assert client_for(reviewer).post(f"/rewards/batches/{trajectory.batch.pk}/score/").status_code == 403

    response = client_for(researcher).post(f"/rewards/batches/{trajectory.batch.pk}/score/", follow=True)
    assert response.status_code == 200
    run = ScoringRun.objects.get()
    assert run.filters == {"batch": trajectory.batch.pk} and run.total == 1 and run.status == "queued"
    assert f"Scoring run {run.pk} queued" in response.content.decode()


def test_the_trajectory_page_says_why_scoring_failed_and_offers_a_retry(researcher: User) -> None:
    trajectory = finished_unscored()
    trajectory.task = None  # its task was deleted: nothing can score it
    trajectory.save(update_fields=["task"])
    with pytest.raises(Exception, match="not in this database"):
        score_trajectory_job(str(trajectory.trajectory_id))  # what the worker runs
    failure = ScoringFailure.objects.get(trajectory=trajectory)
    assert "not in this database" in failure.error
    page = client_for(researcher).get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    assert 'id="scoring-failure"' in page and "not in this database" in page and "Retry scoring" in page
