"""A reviewer clears a trajectory's review flags on its page, with a reason; curation then admits it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from annotation.models import FlagClearance, flag_key
from rewards.services import score_trajectory
from tasks.models import TaskSuite
from tests.conftest import client_for
from tests.factories import TrajectoryFactory, UserFactory
from tests.training.helpers import SPEC, record_score
from training.curation import CurationRule, select
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db
HOSTILE = '<img src=x onerror="alert(1)">'
DYNAMIC = {"detector": "dynamic_code", "evidence": "exec(open('payload.txt').read())", "path": "src/app.py", "line": 3}


def flagged(*flags: dict[str, Any]) -> Trajectory:
    trajectory = TrajectoryFactory.create(final_reward=None, success=None)
    record_score(trajectory, 1.0, True, flags=flags)
    return trajectory


def chosen() -> list[str]:
    return [str(c.trajectory_id) for c in select(CurationRule()).chosen]


def test_a_reviewer_clears_the_flags_on_the_trajectory_page_and_the_clearing_is_recorded(
    reviewer_client: Client, reviewer: User
) -> None:
    trajectory = flagged(DYNAMIC)
    page = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    url = reverse("annotation:clear-flags", args=[trajectory.trajectory_id])
    assert f'hx-post="{url}"' in page and f'value="{flag_key(DYNAMIC)}"' in page and "not cleared" in page
    assert chosen() == []

    response = reviewer_client.post(
        url, {"flag": flag_key(DYNAMIC), "reason": f"reads a fixture it ships {HOSTILE}"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert "Cleared by rob-reviewer" in html and "reads a fixture it ships &lt;img" in html and HOSTILE not in html
    assert f'value="{flag_key(DYNAMIC)}"' not in html  # nothing left to clear
    clearing = FlagClearance.objects.get()
    assert (clearing.reviewer, clearing.trajectory, clearing.flags) == (reviewer, trajectory, [DYNAMIC])
    assert clearing.spec_version == SPEC.version and clearing.reason.startswith("reads a fixture it ships")
    assert chosen() == [str(trajectory.trajectory_id)]
    other = client_for(UserFactory.create(username="second-reviewer", role="reviewer"))
    page = other.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    assert "Cleared by rob-reviewer" in page and "dynamic_code" in page


def test_clearing_some_flags_leaves_the_others_waiting(reviewer_client: Client) -> None:
    exit_hook = {"detector": "process_exit_hook", "evidence": "atexit.register(rewrite_report)", "path": "src/a.py"}
    trajectory = flagged(DYNAMIC, exit_hook)
    url = reverse("annotation:clear-flags", args=[trajectory.trajectory_id])
    assert reviewer_client.post(url, {"flag": flag_key(DYNAMIC), "reason": "a fixture"}).status_code == 200
    assert chosen() == []  # the exit hook still waits for a person
    assert reviewer_client.post(url, {"flag": flag_key(exit_hook), "reason": "flushes a log"}).status_code == 200
    assert chosen() == [str(trajectory.trajectory_id)]
    assert FlagClearance.objects.count() == 2


def test_a_clearing_needs_a_reason_a_current_flag_a_scored_trajectory_and_a_role(
    reviewer_client: Client, outsider: User
) -> None:
    trajectory = flagged(DYNAMIC)
    url = reverse("annotation:clear-flags", args=[trajectory.trajectory_id])
    key = flag_key(DYNAMIC)
    for data, message in [
        ({"flag": key, "reason": "  "}, "say why the flags are harmless"),
        ({"flag": key, "reason": "x" * 5001}, "at most 5000 characters"),
        ({"reason": "fine"}, "choose the flags you reviewed"),
        ({"flag": flag_key({**DYNAMIC, "line": 4}), "reason": "fine"}, "changed since the page was loaded"),
    ]:
        response = reviewer_client.post(url, data)
        assert response.status_code == 400 and message in response.content.decode(), message
    claimed_only = TrajectoryFactory.create(final_reward=None, success=None, claimed={"flags": [DYNAMIC]})
    response = reviewer_client.post(
        reverse("annotation:clear-flags", args=[claimed_only.trajectory_id]), {"flag": key, "reason": "fine"}
    )
    assert response.status_code == 400 and "has not been scored by Crucible" in response.content.decode()
    assert client_for(outsider).post(url, {"flag": key, "reason": "fine"}).status_code == 403
    assert Client().post(url, {"flag": key, "reason": "fine"}).status_code == 302
    assert reviewer_client.get(url).status_code == 405
    assert not FlagClearance.objects.exists() and chosen() == []


def test_a_really_scored_trajectory_with_a_review_flag_waits_for_its_clearing(
    demo_suite: TaskSuite, reviewer_client: Client
) -> None:
    trajectory = Trajectory.objects.get(task__task_id="task_0009")  # the demo's failed, flailing attempt
    reward = score_trajectory(str(trajectory.trajectory_id))  # real hidden tests in a bwrap sandbox
    review = [f for f in reward.flags if SPEC.policy(f["detector"]) == "review"]
    assert review, reward.flags
    selection = select(CurationRule(query={"task": "task_0009"}))
    assert selection.chosen == [] and selection.awaiting_review == 1
    response = reviewer_client.post(
        reverse("annotation:clear-flags", args=[trajectory.trajectory_id]),
        {"flag": [flag_key(f) for f in review], "reason": "it re-ran the tests while thinking, nothing worse"},
    )
    assert response.status_code == 200
    assert [c.trajectory_id for c in select(CurationRule(query={"task": "task_0009"})).chosen] == [
        trajectory.trajectory_id
    ]
