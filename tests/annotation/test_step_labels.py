"""Step labels and review marks: recorded, shown to every reviewer, refused when bad."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import ReviewMark, StepLabel
from tests.conftest import client_for
from tests.factories import StepFactory, TrajectoryFactory, UserFactory
from trajectories.queries import STEP_CHUNK, STEP_MORE

pytestmark = pytest.mark.django_db
HOSTILE = '<img src=x onerror="alert(1)">'


def test_a_reviewer_labels_a_step_and_everyone_sees_it(reviewer_client: Client) -> None:
    step = StepFactory.create(step=1)
    url = reverse("annotation:step-label", args=[step.trajectory.trajectory_id, 1])
    response = reviewer_client.post(
        url, {"label": "reward_hacking", "comment": f"edits the test {HOSTILE}"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and "<html" not in response.content.decode()
    assert "reward hacking: edits the test &lt;img" in response.content.decode()
    other = client_for(UserFactory.create(username="second-reviewer", role="reviewer"))
    page = other.get(f"/trajectories/{step.trajectory.trajectory_id}/").content.decode()
    assert "reward hacking: edits the test" in page and "rob-reviewer" in page and "<img src=x" not in page
    assert StepLabel.objects.get().author.username == "rob-reviewer"


def test_bad_labels_and_strangers_are_refused(reviewer_client: Client, outsider: object) -> None:
    step = StepFactory.create(step=1)
    url = reverse("annotation:step-label", args=[step.trajectory.trajectory_id, 1])
    assert reviewer_client.post(url, {"label": "brilliant"}).status_code == 400
    assert reviewer_client.post(url, {"label": "mistake", "comment": "x" * 5001}).status_code == 400
    assert client_for(outsider).post(url, {"label": "mistake"}).status_code == 403  # type: ignore[arg-type]
    assert Client().post(url, {"label": "mistake"}).status_code == 302
    assert reviewer_client.get(url).status_code == 405
    assert not StepLabel.objects.exists()


def test_a_trajectory_can_be_marked_for_review(reviewer_client: Client) -> None:
    trajectory = TrajectoryFactory.create()
    url = reverse("annotation:review-mark", args=[trajectory.trajectory_id])
    assert (
        "Marked for review by rob-reviewer: odd patch"
        in reviewer_client.post(url, {"note": "odd patch"}).content.decode()
    )
    assert ReviewMark.objects.get().note == "odd patch"


def test_labels_do_not_cost_a_query_per_step(reviewer_client: Client) -> None:
    trajectory = TrajectoryFactory.create()
    for n in range(1, 41):
        StepLabel.objects.create(
            step=StepFactory.create(trajectory=trajectory, step=n),
            author=UserFactory.create(username=f"u{n}"),
            label="good_step",
        )
    with CaptureQueriesContext(connection) as queries:
        html = reviewer_client.get(f"/trajectories/{trajectory.trajectory_id}/").content.decode()
    assert html.count("good step —") == STEP_CHUNK and len(queries) <= 15
    # The chunks loaded as the reader scrolls: a full one costs the queries of a one-step one.
    chunks = f"/trajectories/{trajectory.trajectory_id}/steps/"
    with CaptureQueriesContext(connection) as one:
        assert reviewer_client.get(f"{chunks}?after=39").content.decode().count("good step —") == 1
    with CaptureQueriesContext(connection) as full:
        assert reviewer_client.get(f"{chunks}?after=0").content.decode().count("good step —") == min(STEP_MORE, 40)
    assert len(full) == len(one) <= 15


def test_the_trajectory_page_offers_every_label_and_posts_to_the_annotation_app(reviewer_client: Client) -> None:
    step = StepFactory.create(step=1)
    trajectory_id = step.trajectory.trajectory_id
    page = reviewer_client.get(f"/trajectories/{trajectory_id}/").content.decode()
    assert f'action="/annotation/trajectories/{trajectory_id}/steps/1/labels/"' in page
    assert f'action="/annotation/trajectories/{trajectory_id}/review/"' in page
    for value, text in StepLabel.Label.choices:
        assert f'<option value="{value}">{text}</option>' in page
