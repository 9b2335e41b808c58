"""`GET /api/v1/exports/<kind>/?format=` streams for researchers; unredacted data is an admin's alone."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core.models import AuditEvent
from tasks.models import TaskSuite
from tests.conftest import client_for
from trajectories.models import Step, Trajectory

pytestmark = pytest.mark.django_db
URL = "/api/v1/exports/trajectories/"
PLANTED = "AKIA" + "Q7ZRXW4T2PLM9VBN"


def body(response: object) -> bytes:
    assert getattr(response, "streaming", False), "an export is streamed, never built in memory"
    return b"".join(response.streaming_content)  # type: ignore[attr-defined]


def test_who_may_export_what(
    demo_suite: TaskSuite, admin_user: User, researcher: User, reviewer: User, outsider: User
) -> None:
    Step.objects.filter(pk=Step.objects.order_by("id").values("pk")[:1]).update(observation=f"key {PLANTED}")
    Trajectory.objects.update(redacted_with="rules-of-last-year")  # imported before today's rules: scanned again
    assert Client().get(URL).status_code == 401
    for user in (outsider, reviewer):
        assert client_for(user).get(URL).status_code == 403
    researching = client_for(researcher)
    response = researching.get(URL, {"format": "jsonl"})
    assert response.status_code == 200 and response["X-Crucible-Redacted"] == "true"
    assert response["Content-Disposition"] == 'attachment; filename="trajectories-jsonl.jsonl"'
    lines = body(response).splitlines()
    assert len(lines) == Trajectory.objects.count() and PLANTED.encode() not in b"".join(lines)
    refused = researching.get(URL, {"unredacted": "1"})
    assert refused.status_code == 403 and "admin" in refused.json()["detail"]

    response = client_for(admin_user).get(URL, {"unredacted": "1"})
    assert response.status_code == 200 and response["X-Crucible-Redacted"] == "false"
    data = body(response)
    assert json.loads(data.splitlines()[0])["export_unredacted"] is True and PLANTED.encode() in data
    events = AuditEvent.objects.filter(action="export").order_by("id")
    assert [(e.actor, e.detail["redacted"], e.detail["count"]) for e in events] == [
        (researcher, True, 7),
        (admin_user, False, 7),
    ]


def test_a_bad_request_is_a_400_before_any_byte(demo_suite: TaskSuite, researcher: User) -> None:
    client = client_for(researcher)
    for url, params, message in (
        (URL, {"format": "csv"}, "trajectories export only as"),
        (URL, {"sute": "demo"}, "unknown parameter 'sute'"),
        (URL, {"suite": "nope"}, "no suite named 'nope'"),
        (URL, {"format": "episodes", "tokenizer": "../../etc"}, "tokenizer must be the name of a model directory"),
        ("/api/v1/exports/nothing/", {}, "unknown export kind 'nothing'"),
        ("/api/v1/exports/preferences/", {}, "needs a comparison set"),
    ):
        response = client.get(url, params)
        assert response.status_code == 400, (url, params)
        assert message in json.dumps(response.json()), response.json()
    assert not AuditEvent.objects.filter(action="export").exists()


def test_a_directory_format_streams_as_a_tar(demo_suite: TaskSuite, researcher: User) -> None:
    import io
    import tarfile

    response = client_for(researcher).get("/api/v1/exports/tasks/", {"format": "taskdir", "suite": "demo"})
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(body(response))) as archive:
        names = archive.getnames()
    assert "tasks-taskdir/task_0001/metadata.json" in names and len({n.split("/")[1] for n in names}) == 17
