from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.authtoken.models import Token

from tasks.models import Task, TaskSuite
from tests.conftest import client_for
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db


def page_urls() -> list[str]:
    suite = TaskSuite.objects.get(name="demo")
    task = Task.objects.get(task_id="task_0001")
    trajectory = Trajectory.objects.exclude(task=None).first()
    assert trajectory is not None
    return [
        "/",
        "/tasks/",
        f"/tasks/{suite.name}/",
        f"/tasks/{suite.name}/{task.task_id}/",
        f"/tasks/{suite.name}/{task.task_id}/files/{task.snapshot_files[0][0]}",
        "/trajectories/",
        f"/trajectories/{trajectory.trajectory_id}/",
        "/batches/",
        "/training/sets/",
    ]


API_URLS = ["/api/v1/suites/", "/api/v1/tasks/", "/api/v1/trajectories/", "/api/v1/tasks/task_0001/", "/api/schema/"]


def test_anonymous_visitors_are_sent_to_the_login_page(demo_suite: TaskSuite) -> None:
    for url in page_urls():
        response = Client().get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next="), url


def test_anonymous_api_calls_are_refused(demo_suite: TaskSuite) -> None:
    for url in API_URLS:
        assert Client().get(url).status_code in (401, 403), url


def test_a_user_without_a_role_is_forbidden_everywhere(demo_suite: TaskSuite, outsider: object) -> None:
    client = client_for(outsider)  # type: ignore[arg-type]
    for url in page_urls() + API_URLS:
        assert client.get(url).status_code == 403, url


@pytest.mark.parametrize("role", ["reviewer", "researcher", "admin_user"])
def test_every_role_can_read_every_page_and_endpoint(
    demo_suite: TaskSuite, role: str, request: pytest.FixtureRequest
) -> None:
    client = client_for(request.getfixturevalue(role))
    for url in page_urls() + API_URLS:
        assert client.get(url).status_code == 200, url


def test_the_api_accepts_token_auth(demo_suite: TaskSuite, reviewer: User) -> None:
    token = Token.objects.create(user=reviewer)
    response = Client().get("/api/v1/suites/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200
    assert [s["name"] for s in response.json()["results"]] == ["demo"]
    assert Client().get("/api/v1/suites/", HTTP_AUTHORIZATION="Token wrong").status_code == 401


def test_login_and_logout_work_through_the_forms(reviewer: object) -> None:
    client = Client(enforce_csrf_checks=False)
    response = client.post("/login/", {"username": "rob-reviewer", "password": "correct horse battery"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    client.post("/logout/")
    assert client.get("/").status_code == 302
    assert Client().post("/login/", {"username": "rob-reviewer", "password": "nope"}).status_code == 200
