"""Exports through the object store: written on one host, downloaded byte for byte on another."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from pytest_django import Settings

from core.models import AuditEvent
from core.objectstore import S3Store
from core.storage import object_store
from tasks.models import TaskSuite
from tests.conftest import client_for
from tests.storage.conftest import S3Server

pytestmark = pytest.mark.django_db
PLANTED = "AKIA" + "Q7ZRXW4T2PLM9VBN"


def _body(response: object) -> bytes:
    assert getattr(response, "streaming", False), "a stored export is streamed from the store, never read whole"
    return b"".join(response.streaming_content)  # type: ignore[attr-defined]


def _command(*args: str) -> str:
    out = io.StringIO()
    call_command("export", *args, stdout=out, verbosity=0)
    return out.getvalue()


def test_an_export_stored_on_one_host_downloads_byte_for_byte_on_another(
    settings: Settings, shared_store: Path, demo_suite: TaskSuite, researcher: User
) -> None:
    local = shared_store / "host-a-file.jsonl"
    _command("trajectories", "--out", str(local))
    said = _command("trajectories", "--to-store")
    key = next(object_store().keys("exports/trajectories/"))
    assert key.endswith("-jsonl.jsonl") and key in said and "7 trajectories" in said
    assert object_store().get_bytes(key) == local.read_bytes()

    settings.VAR_DIR = shared_store / "host-b"  # another web host: its own var/, nothing shared
    kind, name = key.split("/")[1:]
    response = client_for(researcher).get(f"/api/v1/exports/stored/{kind}/{name}/")

    assert response.status_code == 200 and response["Content-Type"] == "application/jsonl"
    assert int(response["Content-Length"]) == local.stat().st_size
    assert _body(response) == local.read_bytes()
    assert not (shared_store / "host-b").exists()  # streamed straight from the store, nothing spooled


def test_the_api_stores_an_export_and_only_admins_fetch_an_unredacted_one(
    settings: Settings, shared_store: Path, demo_suite: TaskSuite, researcher: User, admin_user: User
) -> None:
    from trajectories.models import Step, Trajectory

    Step.objects.filter(pk=Step.objects.order_by("id").values("pk")[:1]).update(observation=f"key {PLANTED}")
    Trajectory.objects.update(redacted_with="rules-of-last-year")  # imported before today's rules: scanned again
    created = client_for(researcher).post(
        "/api/v1/exports/tasks/", {"format": "taskdir", "suite": "demo"}, content_type="application/json"
    )
    assert created.status_code == 201, created.content
    stored = created.json()
    assert stored["key"].startswith("exports/tasks/") and stored["key"].endswith("-taskdir.tar")
    assert stored["count"] == 17 and stored["redacted"] is True

    settings.VAR_DIR = shared_store / "host-b"
    response = client_for(researcher).get(stored["download"])
    data = _body(response)
    assert len(data) == stored["bytes"]
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        assert "tasks-taskdir/task_0001/metadata.json" in archive.getnames()

    refused = client_for(researcher).post(
        "/api/v1/exports/trajectories/", {"format": "jsonl", "unredacted": True}, content_type="application/json"
    )
    assert refused.status_code == 403
    secret = client_for(admin_user).post(
        "/api/v1/exports/trajectories/", {"format": "jsonl", "unredacted": True}, content_type="application/json"
    )
    assert secret.status_code == 201 and secret.json()["key"].endswith("-jsonl-unredacted.jsonl")
    assert client_for(researcher).get(secret.json()["download"]).status_code == 403
    unredacted = client_for(admin_user).get(secret.json()["download"])
    assert unredacted["X-Crucible-Redacted"] == "false" and PLANTED.encode() in _body(unredacted)
    downloads = AuditEvent.objects.filter(action="export", detail__download=True)
    assert sorted((e.actor.username, e.detail["redacted"]) for e in downloads if e.actor) == [
        ("alice-admin", False),
        ("rita-researcher", True),
    ]


def test_a_download_names_only_what_this_module_stores(shared_store: Path, researcher: User) -> None:
    client = client_for(researcher)
    object_store().put_bytes("exports/tasks/notes.txt", b"not an export")
    for url in (
        "/api/v1/exports/stored/tasks/notes.txt/",
        "/api/v1/exports/stored/nothing/0123456789abcdef0123456789abcdef-jsonl.jsonl/",
        "/api/v1/exports/stored/tasks/0123456789abcdef0123456789abcdef-jsonl.jsonl/",  # well named, absent
        "/api/v1/exports/stored/tasks/..%2F..%2Fsecrets-jsonl.jsonl/",
    ):
        assert client.get(url).status_code == 404, url
    missing_format = client.post("/api/v1/exports/tasks/", {}, content_type="application/json")
    assert missing_format.status_code == 400 and "format is required" in json.dumps(missing_format.json())
    assert not any(key.endswith(".jsonl") for key in object_store().keys("exports/"))


def test_the_command_writes_to_a_named_bucket_and_refuses_bad_urls(
    settings: Settings, s3_server: S3Server, bucket_url: str, demo_suite: TaskSuite, tmp_path: Path
) -> None:
    settings.CRUCIBLE_S3_ENDPOINT_URL = s3_server.endpoint  # storage itself stays local: --out names the bucket
    settings.VAR_DIR = tmp_path / "host"
    bucket, prefix = bucket_url.removeprefix("s3://").split("/", 1)
    S3Store(bucket, endpoint_url=s3_server.endpoint).ensure_bucket()
    local = tmp_path / "tasks.parquet"
    _command("tasks", "--format", "parquet", "--out", str(local))
    said = _command("tasks", "--format", "parquet", "--out", f"{bucket_url}/nightly/tasks.parquet")
    assert f"{bucket_url}/nightly/tasks.parquet" in said
    client = s3_server.client()
    got = client.get_object(Bucket=bucket, Key=f"{prefix}/nightly/tasks.parquet")["Body"].read()  # type: ignore[attr-defined]
    assert got == local.read_bytes()
    assert not (Path(settings.VAR_DIR) / "objects").exists()  # the configured (local) store was not used
    with pytest.raises(CommandError, match="expected s3://bucket/key"):
        _command("tasks", "--out", f"s3://{bucket}/")
    with pytest.raises(CommandError, match="not stored"):
        _command("tasks", "--out", "s3://no-such-bucket-here/tasks.jsonl")
    with pytest.raises(CommandError, match="is not a valid object key"):
        _command("tasks", "--out", f"s3://{bucket}/../up.jsonl")
