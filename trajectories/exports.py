"""Streaming export of trajectories as JSONL, in constant memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
from django.db import connection
from django.db.models import QuerySet

from core.vocabulary import TrajectoryStatus
from trajectories.bulk import STEP_COLUMNS
from trajectories.models import Step, Trajectory
from trajectories.schema import format_time, record_bytes

CHUNK_TRAJECTORIES = 200
CHUNK_STEPS = 5000
FETCH_ROWS = 2000
TRAJECTORY_COLUMNS = (
    "id",
    "schema_version",
    "trajectory_id",
    "task_ref",
    "task_version",
    "base_commit",
    "prompt",
    "policy",
    "sandbox",
    "patch",
    "final_reward",
    "success",
    "termination",
    "flags",
    "claimed",
    "source",
    "created_at",
    "extra",
    "step_count",
    "redacted_with",
)
JSON_COLUMNS = frozenset({"action_input", "reward_breakdown", "extra"})
EMPTY_OBJECT = "{}"
# Given a chunk's trajectory primary keys, the outcome fields (final_reward, success, flags) to
# write instead of the stored ones, e.g. a training set's rewards under the spec that chose it.
OutcomeOverride = Callable[[list[int]], dict[int, dict[str, Any]]]


def finished_only(queryset: QuerySet[Trajectory]) -> QuerySet[Trajectory]:
    """What an export gives by default: trajectories that ended. Queued, running and cancelled
    ones (often 0 steps) are not data, and a failed one is an infrastructure failure a worker
    retries, not an agent's attempt."""
    return queryset.filter(status=TrajectoryStatus.FINISHED)


def iter_trajectory_lines(
    queryset: QuerySet[Trajectory] | None = None, outcomes: OutcomeOverride | None = None
) -> Iterator[bytes]:
    """JSONL lines for the trajectories, walked by primary key.

    Keyset paging (id > last) keeps each query cheap however far in we are; steps are
    read with fetchmany, so memory holds one batch of rows and one trajectory's steps.
    final_reward, success and flags are the verified ones (null until scored); a claim
    from an imported file goes out under `claimed` (trajectories.schema).
    """
    for line, _ in iter_trajectory_lines_redacted_with(queryset, outcomes):
        yield line


def iter_trajectory_lines_redacted_with(
    queryset: QuerySet[Trajectory] | None = None, outcomes: OutcomeOverride | None = None
) -> Iterator[tuple[bytes, str]]:
    """`iter_trajectory_lines`, each line with the redaction rules version it was imported under."""
    qs = (queryset if queryset is not None else Trajectory.objects.all()).order_by("id")
    last = 0
    while True:
        candidates = list(qs.filter(id__gt=last).values(*TRAJECTORY_COLUMNS)[:CHUNK_TRAJECTORIES])
        if not candidates:
            return
        chunk: list[dict[str, Any]] = []
        steps = 0
        for row in candidates:
            if chunk and steps + row["step_count"] > CHUNK_STEPS:
                break
            chunk.append(row)
            steps += row["step_count"]
        last = chunk[-1]["id"]
        if outcomes is not None:
            replaced = outcomes([row["id"] for row in chunk])
            for row in chunk:
                row.update(replaced.get(row["id"], {}))
        step_rows = _step_rows([row["id"] for row in chunk])
        pending = next(step_rows, None)
        for row in chunk:
            own: list[dict[str, Any]] = []
            while pending is not None and pending["trajectory_id"] == row["id"]:
                own.append(pending)
                pending = next(step_rows, None)
            yield record_bytes(row, own), row["redacted_with"]


def _step_rows(trajectory_pks: list[int]) -> Iterator[dict[str, Any]]:
    """Steps ordered by (trajectory, step), straight from SQL.

    JSON columns are passed through as already-encoded text (orjson.Fragment) rather
    than decoded and encoded again, which was most of the export's time.
    """
    postgres = connection.vendor == "postgresql"
    qn = connection.ops.quote_name
    columns = []
    for name in STEP_COLUMNS:
        if name in JSON_COLUMNS and postgres:
            columns.append(f"{qn(name)}::text")
        elif name == "timestamp" and postgres:
            columns.append(f"""to_char({qn(name)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')""")
        else:
            columns.append(qn(name))
    placeholders = ", ".join(["%s"] * len(trajectory_pks))
    sql = (
        f"SELECT {', '.join(columns)} FROM {qn(Step._meta.db_table)} "  # noqa: S608 - names are ours
        f"WHERE {qn('trajectory_id')} IN ({placeholders}) ORDER BY {qn('trajectory_id')}, {qn('step')}"
    )
    stamp_at = STEP_COLUMNS.index("timestamp")
    extra_at = STEP_COLUMNS.index("extra")
    json_at = [i for i, name in enumerate(STEP_COLUMNS) if name in JSON_COLUMNS and i != extra_at]
    bool_at = STEP_COLUMNS.index("observation_truncated")
    with connection.cursor() as cursor:
        cursor.execute(sql, trajectory_pks)
        while rows := cursor.fetchmany(FETCH_ROWS):
            for raw in rows:
                row = list(raw)
                for i in json_at:
                    if row[i] is not None:
                        row[i] = orjson.Fragment(row[i])
                # Unknown keys are merged into the step object, so they must be decoded.
                extra = row[extra_at]
                row[extra_at] = None if extra in (None, EMPTY_OBJECT) else orjson.loads(extra)
                row[bool_at] = bool(row[bool_at])
                row[stamp_at] = _stamp_text(row[stamp_at])
                yield dict(zip(STEP_COLUMNS, row, strict=True))


def _stamp_text(value: str | datetime | None) -> str | None:
    """PostgreSQL's formatted UTC text, or SQLite's naive UTC datetime -> ISO with Z."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return format_time(value if value.tzinfo else value.replace(tzinfo=UTC))
    text = value
    if text.endswith(".000000"):
        text = text[:-7]
    return text + "Z"
