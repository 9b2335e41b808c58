"""Archive and restore: a finished batch's steps moved to the object store and back.

Steps are nearly all of the database's bytes (observations, patches, tool output) and old
batches are read rarely, so archiving keeps each trajectory's row (its summary: reward,
outcome, step count, patch) and moves the Step rows to one gzipped JSONL object per batch,
`archives/batch-<id>-<sha256 prefix>.jsonl.gz`. Opening an archived trajectory restores its
batch first, so every page and export works as before.

Each line is one Step row, every column but the ids, in a form that reads back to the same
values; restoring re-creates the rows in one transaction, so an archived batch exports
byte-for-byte as it did before. The object is written and checked before any row is
deleted; a failure on the way leaves the batch exactly as it was.
"""

from __future__ import annotations

import gzip
import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from django.db import transaction
from django.utils import timezone

from core.storage import object_store
from core.vocabulary import RunStatus
from trajectories.bulk import STEP_COLUMNS
from trajectories.models import RetentionRule, RolloutBatch, Step, Trajectory

FIELDS = STEP_COLUMNS[1:]  # every column of a step but its trajectory, as the bulk import writes them
ARCHIVE_FORMAT = "crucible-steps/1"
CHUNK = 2000
FINISHED = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})


class ArchiveError(RuntimeError):
    pass


@dataclass(frozen=True)
class ArchiveResult:
    batch_id: int
    key: str
    steps: int
    bytes: int


def _rows(batch: RolloutBatch) -> Iterator[bytes]:
    yield orjson.dumps({"format": ARCHIVE_FORMAT, "batch": batch.pk}) + b"\n"
    steps = (
        Step.objects.filter(trajectory__batch=batch)
        .order_by("trajectory__trajectory_id", "step")
        .values_list("trajectory__trajectory_id", *FIELDS)
    )
    for row in steps.iterator(chunk_size=CHUNK):
        record: dict[str, Any] = {"trajectory": str(row[0])}
        for name, value in zip(FIELDS, row[1:], strict=True):
            record[name] = value.isoformat() if isinstance(value, datetime) else value
        yield orjson.dumps(record) + b"\n"


def archive_batch(batch: RolloutBatch) -> ArchiveResult:
    """Move a finished batch's steps to the object store; its trajectories keep their summaries."""
    if batch.archived_at is not None:
        raise ArchiveError(f"batch {batch.pk} is already archived ({batch.archive_key})")
    if batch.status not in FINISHED:
        raise ArchiveError(f"batch {batch.pk} is {batch.status}: only finished batches are archived")
    digest = hashlib.sha256()
    count = 0
    with tempfile.TemporaryDirectory(prefix="crucible-archive-") as tmp:
        path = Path(tmp) / "steps.jsonl.gz"
        # mtime=0: the same steps always make the same bytes, and so the same key.
        with gzip.GzipFile(path, "wb", compresslevel=6, mtime=0) as out:
            for line in _rows(batch):
                out.write(line)
                digest.update(line)
                count += 1
        steps = count - 1
        key = f"archives/batch-{batch.pk}-{digest.hexdigest()[:16]}.jsonl.gz"
        size = path.stat().st_size
        store = object_store()
        store.put_file(key, path)
        if store.size(key) != size:
            raise ArchiveError(f"batch {batch.pk}: the store holds {store.size(key)} bytes of {size}; nothing deleted")
    with transaction.atomic():
        locked = RolloutBatch.objects.select_for_update().get(pk=batch.pk)
        if locked.archived_at is not None:
            raise ArchiveError(f"batch {batch.pk} was archived by someone else meanwhile")
        deleted, _ = Step.objects.filter(trajectory__batch=locked).delete()
        if deleted != steps:  # a step written after we read: keep everything, try again later
            raise ArchiveError(f"batch {batch.pk} changed while it was archived ({deleted} steps, {steps} read)")
        RolloutBatch.objects.filter(pk=batch.pk).update(
            archived_at=timezone.now(), archive_key=key, archive_bytes=size, archived_steps=steps
        )
    batch.refresh_from_db()
    return ArchiveResult(batch.pk, key, steps, size)


def _step(record: dict[str, Any], trajectory_pk: int) -> Step:
    values = {name: record[name] for name in FIELDS}
    if values["timestamp"] is not None:
        values["timestamp"] = datetime.fromisoformat(values["timestamp"])
    return Step(trajectory_id=trajectory_pk, **values)


def restore_batch(batch: RolloutBatch) -> int:
    """Bring an archived batch's steps back into the database; returns how many."""
    if batch.archived_at is None:
        return 0
    with tempfile.TemporaryDirectory(prefix="crucible-restore-") as tmp:
        path = Path(tmp) / "steps.jsonl.gz"
        object_store().get_file(batch.archive_key, path)
        ids = dict(Trajectory.objects.filter(batch=batch).values_list("trajectory_id", "pk"))
        by_text = {str(k): v for k, v in ids.items()}
        restored = 0
        with transaction.atomic():
            locked = RolloutBatch.objects.select_for_update().get(pk=batch.pk)
            if locked.archived_at is None:
                return 0  # restored by a concurrent opener
            with gzip.open(path, "rb") as lines:
                header = orjson.loads(next(lines))
                if header.get("format") != ARCHIVE_FORMAT or header.get("batch") != batch.pk:
                    raise ArchiveError(f"{batch.archive_key} is not the step archive of batch {batch.pk}")
                pending: list[Step] = []
                for line in lines:
                    record = orjson.loads(line)
                    pending.append(_step(record, by_text[record["trajectory"]]))
                    if len(pending) >= CHUNK:
                        Step.objects.bulk_create(pending)
                        restored += len(pending)
                        pending = []
                Step.objects.bulk_create(pending)
                restored += len(pending)
            if restored != locked.archived_steps:
                raise ArchiveError(f"{batch.archive_key} holds {restored} steps, the batch had {locked.archived_steps}")
            RolloutBatch.objects.filter(pk=batch.pk).update(
                archived_at=None, archive_key="", archive_bytes=0, archived_steps=0
            )
    batch.refresh_from_db()
    return restored


def ensure_steps(trajectory: Trajectory) -> None:
    """Called before showing or exporting a trajectory: an archived batch is restored first."""
    batch = trajectory.batch
    if batch is not None and batch.archived_at is not None:
        restore_batch(batch)


def due_for_archive(now: datetime | None = None) -> list[RolloutBatch]:
    """Finished, unarchived batches older than their suite's retention rule."""
    now = now or timezone.now()
    due: list[RolloutBatch] = []
    for rule in RetentionRule.objects.select_related("suite"):
        cutoff = now - timedelta(days=rule.archive_after_days)
        due += RolloutBatch.objects.filter(
            suite=rule.suite, archived_at__isnull=True, status__in=FINISHED, finished_at__lt=cutoff
        ).order_by("finished_at")
    return due
