"""`GET /api/v1/exports/<kind>/?format=` streams for researchers; unredacted data is an admin's alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
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


def test_a_bad_request_is_a_400_before_any_byte_that_names_the_parameter(
    demo_suite: TaskSuite, researcher: User
) -> None:
    client = client_for(researcher)
    for url, params, parameter, message in (
        (URL, {"format": "csv"}, "format", "trajectories export only as jsonl, parquet"),
        (URL, {"sute": "demo"}, "sute", "unknown parameter: exports take format, suite, batch, set"),
        (URL, {"suite": "nope"}, "suite", "no suite named 'nope'"),
        (URL, {"batch": "one"}, "batch", "must be a batch id"),
        (URL, {"keep_ties": "maybe"}, "keep_ties", "must be 1 or 0, not 'maybe'"),
        (URL, {"format": "episodes", "tokenizer": "../../etc"}, "tokenizer", "must be the name of a model directory"),
        (URL, {"format": "episodes"}, "tokenizer", "an episodes export needs a tokenizer"),
        (URL, {"set": "x"}, "set", "does not apply to a trajectories jsonl export"),
        (URL, {"model_name": "m"}, "model_name", "does not apply to a trajectories jsonl export"),
        ("/api/v1/exports/nothing/", {}, "kind", "unknown export kind 'nothing'"),
        ("/api/v1/exports/preferences/", {}, "set", "a preferences export needs the name of a comparison set"),
        ("/api/v1/exports/preferences/", {"set": "nope"}, "set", "no comparison set named 'nope'"),
        ("/api/v1/exports/training-set/", {}, "set", "needs the training set's NAME or NAME@VERSION"),
        ("/api/v1/exports/training-set/", {"set": "all@x"}, "set", "training set version must be a number"),
    ):
        response = client.get(url, params)
        assert response.status_code == 400, (url, params)
        problem = response.json()
        assert problem["type"] == "urn:crucible:problem:validation", problem
        assert list(problem["errors"]) == [parameter], problem
        assert message in problem["errors"][parameter][0], problem
        assert problem["detail"].startswith(f"{parameter}: "), problem
    assert not AuditEvent.objects.filter(action="export").exists()


def test_the_export_command_names_its_flag_where_the_api_names_its_parameter(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="^--tokenizer: an episodes export needs a tokenizer"):
        call_command("export", "trajectories", "--format", "episodes", "--out", str(tmp_path / "x"), verbosity=0)
    with pytest.raises(CommandError, match="^--set: no comparison set named 'nope'"):
        call_command("export", "preferences", "--set", "nope", "--out", str(tmp_path / "x"), verbosity=0)


def test_a_directory_format_streams_as_a_tar(demo_suite: TaskSuite, researcher: User) -> None:
    import io
    import tarfile

    response = client_for(researcher).get("/api/v1/exports/tasks/", {"format": "taskdir", "suite": "demo"})
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(body(response))) as archive:
        names = archive.getnames()
    assert "tasks-taskdir/task_0001/metadata.json" in names and len({n.split("/")[1] for n in names}) == 17
