"""Archive and restore: a batch's steps go to the object store and come back byte-for-byte."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from pytest_django import Settings

from tasks.models import TaskSuite
from tests.conftest import client_for
from tests.storage.conftest import S3Server
from trajectories.archive import ArchiveError, archive_batch, due_for_archive, restore_batch
from trajectories.exports import iter_trajectory_lines
from trajectories.models import RetentionRule, RolloutBatch, Step, Trajectory

pytestmark = pytest.mark.django_db


def finished_batch(suite: TaskSuite, count: int = 4, days_ago: int = 0) -> RolloutBatch:
    batch = RolloutBatch.objects.create(
        suite=suite, policy_kind="scripted", status="succeeded", finished_at=timezone.now() - timedelta(days=days_ago)
    )
    picked = list(Trajectory.objects.filter(batch__isnull=True).order_by("trajectory_id")[:count])
    for index, trajectory in enumerate(picked):
        trajectory.batch, trajectory.sample_index = batch, index
        trajectory.save(update_fields=["batch", "sample_index"])
    return batch


def export_bytes(batch: RolloutBatch) -> bytes:
    return b"".join(iter_trajectory_lines(Trajectory.objects.filter(batch=batch).order_by("trajectory_id")))


@pytest.mark.parametrize("where", ["local", "s3"])
def test_an_archived_batch_restores_byte_for_byte_when_someone_opens_it(
    request: pytest.FixtureRequest, where: str, demo_suite: TaskSuite, settings: Settings, admin_user: object
) -> None:
    if where == "s3":
        server: S3Server = request.getfixturevalue("s3_server")
        settings.CRUCIBLE_STORAGE_URL = request.getfixturevalue("bucket_url")
        settings.CRUCIBLE_S3_ENDPOINT_URL = server.endpoint
    batch = finished_batch(demo_suite)
    before = export_bytes(batch)
    steps = Step.objects.filter(trajectory__batch=batch).count()
    assert steps > 0

    result = archive_batch(batch)

    assert result.steps == steps and batch.archived_at is not None and result.key.startswith("archives/batch-")
    assert not Step.objects.filter(trajectory__batch=batch).exists()
    trajectory = Trajectory.objects.filter(batch=batch).first()
    assert trajectory is not None and trajectory.step_count > 0  # the summary stays
    page = client_for(admin_user).get(f"/trajectories/{trajectory.trajectory_id}/")  # type: ignore[arg-type]
    assert page.status_code == 200
    batch.refresh_from_db()
    assert batch.archived_at is None and Step.objects.filter(trajectory__batch=batch).count() == steps
    assert export_bytes(batch) == before
    # Archiving again makes the same object: the key is the content's hash.
    assert archive_batch(batch).key == result.key and restore_batch(batch) == steps


def test_an_unfinished_batch_or_a_failing_store_leaves_the_batch_as_it_was(
    demo_suite: TaskSuite, settings: Settings, tmp_path: Path
) -> None:
    running = finished_batch(demo_suite, count=1)
    RolloutBatch.objects.filter(pk=running.pk).update(status="running")
    running.refresh_from_db()
    with pytest.raises(ArchiveError, match="is running: only finished batches"):
        archive_batch(running)
    batch = finished_batch(demo_suite, count=2)
    steps = Step.objects.filter(trajectory__batch=batch).count()
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's folder should be")
    settings.CRUCIBLE_STORAGE_URL = str(blocker)
    with pytest.raises(CommandError):
        call_command("archive_batches", str(batch.pk))
    batch.refresh_from_db()
    assert batch.archived_at is None and Step.objects.filter(trajectory__batch=batch).count() == steps


def test_retention_rules_archive_only_what_is_due(demo_suite: TaskSuite) -> None:
    old = finished_batch(demo_suite, count=1, days_ago=40)
    recent = finished_batch(demo_suite, count=1, days_ago=2)
    RetentionRule.objects.create(suite=demo_suite, archive_after_days=30)
    assert due_for_archive() == [old]
    call_command("archive_batches", "--retention")
    old.refresh_from_db()
    recent.refresh_from_db()
    assert old.archived_at is not None and recent.archived_at is None
    with pytest.raises(CommandError, match="already archived"):
        call_command("archive_batches", str(old.pk))


def test_the_dashboard_shows_storage_by_suite(demo_suite: TaskSuite, admin_user: object) -> None:
    batch = finished_batch(demo_suite, count=2)
    steps = Step.objects.filter(trajectory__batch=batch).count()
    result = archive_batch(batch)
    page = client_for(admin_user).get("/")  # type: ignore[arg-type]
    row = next(r for r in page.context["counts"]["storage"] if r["suite"] == "demo")
    assert row["archived_batches"] == 1 and row["archived_steps"] == steps
    assert row["archive_bytes"] == result.bytes
    assert row["steps"] == Step.objects.filter(trajectory__suite=demo_suite).count()
    assert b'id="storage"' in page.content
