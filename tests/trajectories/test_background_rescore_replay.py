"""Rescore and replay run as background jobs that report progress and their result on the
trajectory's live group; the buttons answer at once with a status the page can show."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from rewards import jobs as reward_jobs
from tasks.services import import_task_dirs
from tests.conftest import DEMO, client_for
from trajectories import replay as replay_module
from trajectories.batches import start_batch
from trajectories.events import trajectory_live_group
from trajectories.jobs import replay_trajectory_job
from trajectories.models import Trajectory
from trajectories.replay import run_replay
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def rollout() -> Trajectory:
    import_task_dirs(DEMO / "tasks" / "task_0001", "bg")
    from tasks.models import TaskSuite

    batch = start_batch(TaskSuite.objects.get(name="bg"), RolloutSettings("scripted"), enqueue=False)
    trajectory = run_trajectory(batch.trajectories.get().pk)
    assert trajectory is not None and trajectory.step_count >= 3
    return trajectory


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    heard: list[tuple[str, dict[str, Any]]] = []
    for module in (replay_module, reward_jobs):
        monkeypatch.setattr(module, "publish_on_commit", lambda group, event: heard.append((group, dict(event))))
    return heard


def test_replay_answers_with_a_progress_bar_and_reports_every_step_then_the_result(
    rollout: Trajectory, researcher: User, events: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    queued: list[str] = []
    monkeypatch.setattr(replay_trajectory_job, "delay", queued.append)
    client = client_for(researcher)
    url = f"/trajectories/{rollout.trajectory_id}/replay/"
    response = client.post(url, **HX)  # type: ignore[arg-type]
    html = response.content.decode()
    assert response.status_code == 200 and '<progress id="replay-progress"' in html and ">queued<" in html
    assert queued == [str(rollout.trajectory_id)]

    data = replay_trajectory_job(str(rollout.trajectory_id))  # what the worker runs
    group = trajectory_live_group(rollout.trajectory_id)
    assert {g for g, _ in events} == {group}
    states = [(e["state"], e["done"]) for _, e in events]
    n = rollout.step_count
    assert states == [("queued", 0), ("running", 0), *[("running", k) for k in range(1, n + 1)], ("succeeded", n)]
    assert events[-1][1]["reproducible"] is True and data["reproducible"] is True
    rollout.refresh_from_db()
    assert rollout.replay_report["state"] == "succeeded" and rollout.replay_report["same"] == n
    page = client.get(f"/trajectories/{rollout.trajectory_id}/").content.decode()
    assert 'data-state="succeeded"' in page and "reproducible</span> all" in page
    assert client.post(url).status_code == 302  # without htmx, back to the page


def test_a_failed_replay_says_why_on_the_page(
    rollout: Trajectory, researcher: User, events: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("sandbox backend 'bwrap' is not installed")

    monkeypatch.setattr(replay_module, "run_episode", broken)
    with pytest.raises(RuntimeError):
        run_replay(str(rollout.trajectory_id))
    assert events[-1][1] == {
        "kind": "replay",
        "state": "failed",
        "done": 0,
        "steps": rollout.step_count,
        "error": "sandbox backend 'bwrap' is not installed",
    }
    page = client_for(researcher).get(f"/trajectories/{rollout.trajectory_id}/").content.decode()
    assert "replay failed</span> sandbox backend &#x27;bwrap&#x27; is not installed" in page


class Queued:
    id = "job-123"


def test_rescore_answers_with_a_status_line_and_the_job_reports_its_result(
    rollout: Trajectory, researcher: User, events: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    queued: list[str] = []

    def enqueue(pk: str) -> Queued:
        queued.append(pk)
        return Queued()

    monkeypatch.setattr(reward_jobs.score_trajectory_job, "delay", enqueue)
    client = client_for(researcher)
    url = f"/rewards/trajectories/{rollout.trajectory_id}/rescore/"
    html = client.post(url, **HX).content.decode()  # type: ignore[arg-type]
    assert 'data-state="queued"' in html and f"/rescore/{Queued.id}/" in html and queued == [str(rollout.trajectory_id)]
    # The status line can be asked again (after a reconnect): the job has not left the queue.
    assert 'data-state="queued"' in client.get(f"{url}{Queued.id}/").content.decode()

    result = reward_jobs.score_trajectory_job(str(rollout.trajectory_id))
    assert [e["state"] for _, e in events] == ["running", "succeeded"]
    assert events[-1][1]["reward"] == result["reward"] == 1.0 and events[-1][1]["resolved"] is True

    # Scored under this spec already: said at once, nothing queued.
    again = client.post(url, **HX).content.decode()  # type: ignore[arg-type]
    assert 'data-state="already"' in again and "nothing to do" in again and len(queued) == 1
    assert client.post(url).status_code == 302


def test_a_failed_scoring_reports_its_error(
    rollout: Trajectory, events: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("model server unreachable\nat 127.0.0.1:9")

    monkeypatch.setattr(reward_jobs, "score_trajectory", broken)
    with pytest.raises(RuntimeError):
        reward_jobs.score_trajectory_job(str(rollout.trajectory_id))
    assert events[-1][1] == {"kind": "scoring", "state": "failed", "error": "model server unreachable at 127.0.0.1:9"}
