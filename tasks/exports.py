"""Tasks as JSONL: one line per task with its metadata and content hashes."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
from django.db.models import QuerySet

from tasks.models import Task


def task_record(task: Task) -> dict[str, object]:
    return {
        **task.metadata,
        "task_id": task.task_id,
        "suite": task.suite.name,
        "statement": task.statement,
        "expected_patch": task.expected_patch,
        "version": task.version,
        "snapshot_hash": task.snapshot_hash,
        "tests_hash": task.tests_hash,
        "validation_status": task.validation_status,
    }


def iter_task_lines(queryset: QuerySet[Task]) -> Iterator[bytes]:
    for task in queryset.select_related("suite").order_by("id").iterator(chunk_size=200):
        yield orjson.dumps(task_record(task)) + b"\n"
