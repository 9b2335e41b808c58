"""Search over trajectories and reviewers' saved filters (curation lives in tests/training)."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import StepFactory, TrajectoryFactory
from trajectories.models import SavedFilter, Trajectory, duplicate_rate

pytestmark = pytest.mark.django_db


def make(task: str, success: bool, patch: str = "p", reward: float | None = None, **kw: object) -> Trajectory:
    return TrajectoryFactory.create(
        task_ref=task,
        success=success,
        final_reward=reward if reward is not None else (1.0 if success else 0.0),
        patch=patch,
        **kw,
    )


def ids(client: Client, query: str) -> set[str]:
    return {t["trajectory_id"] for t in client.get(f"/api/v1/trajectories/?{query}").json()["results"]}


def test_filters_cover_flags_length_duplicates_and_text(reviewer_client: Client) -> None:
    flagged = make("t1", False, flags=[{"detector": "eq_override", "evidence": "x"}], step_count=30)
    clean = make("t1", True, step_count=4, duplicate_rate=0.5)
    StepFactory.create(trajectory=clean, observation="Traceback: KeyError 'colour'")
    assert ids(reviewer_client, "flag=eq_override") == {str(flagged.trajectory_id)}
    assert ids(reviewer_client, "min_steps=10") == {str(flagged.trajectory_id)}
    assert ids(reviewer_client, "max_duplicate_rate=0.2") == {str(flagged.trajectory_id)}
    assert ids(reviewer_client, "q=colour") == {str(clean.trajectory_id)}
    assert ids(reviewer_client, "q=nothing-like-this") == set()


def test_the_duplicate_rate_counts_repeated_actions() -> None:
    assert (
        duplicate_rate(
            [("run_tests", "pytest"), ("run_tests", "pytest"), ("read_file", "a.py"), ("run_tests", "pytest")]
        )
        == 0.5
    )
    assert duplicate_rate([]) == 0.0


def test_a_saved_filter_comes_back_for_its_owner(reviewer_client: Client) -> None:
    response = reviewer_client.post("/trajectories/filters/", {"name": "hacks", "query": "flag=eq_override"})
    assert response.status_code == 302
    html = reviewer_client.get("/trajectories/").content.decode()
    assert '<a href="?flag=eq_override">hacks</a>' in html
    nameless = reviewer_client.post("/trajectories/filters/", {"name": "", "query": "x=1"}, follow=True)
    assert (
        nameless.redirect_chain == [("/trajectories/?x=1", 302)]
        and "Name the filter to save it." in nameless.content.decode()
    )
    assert SavedFilter.objects.count() == 1
