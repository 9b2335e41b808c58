"""Streaming export of trajectories as JSONL, in constant memory."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson
from django.db import connection
from django.db.models import QuerySet

from core.vocabulary import TrajectoryStatus
from tasks.lang_tests import PYTHON
from tasks.models import Task
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
EMPTY_FRAGMENT = orjson.Fragment(EMPTY_OBJECT)
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
    for exported in iter_trajectory_lines_redacted_with(queryset, outcomes):
        yield exported.line


class ExportLine(NamedTuple):
    """One trajectory's JSONL line and what redaction on the way out needs to know without parsing it."""

    line: bytes
    redacted_with: str  # the redaction rules version it was imported under ("" when unknown)
    flags: Any = None  # the line's own `flags` (written after import, so scanned again on export)


def iter_trajectory_lines_redacted_with(
    queryset: QuerySet[Trajectory] | None = None, outcomes: OutcomeOverride | None = None
) -> Iterator[ExportLine]:
    """`iter_trajectory_lines`, each line with the redaction rules version it was imported under."""
    qs = (queryset if queryset is not None else Trajectory.objects.all()).order_by("id")
    last = 0
    fetched: deque[dict[str, Any]] = deque()
    while True:
        if not fetched:
            fetched.extend(qs.filter(id__gt=last).values(*TRAJECTORY_COLUMNS)[:CHUNK_TRAJECTORIES])
            if not fetched:
                return
            last = fetched[-1]["id"]
        # What one chunk of steps holds; the trajectories fetched beyond it wait for the next.
        chunk = [fetched.popleft()]
        steps = chunk[0]["step_count"]
        while fetched and steps + fetched[0]["step_count"] <= CHUNK_STEPS:
            steps += fetched[0]["step_count"]
            chunk.append(fetched.popleft())
        if outcomes is not None:
            replaced = outcomes([row["id"] for row in chunk])
            for row in chunk:
                row.update(replaced.get(row["id"], {}))
        by_trajectory = _steps_by_trajectory([row["id"] for row in chunk])
        pk, own = next(by_trajectory, (None, []))
        for row in chunk:
            if pk == row["id"]:
                yield ExportLine(record_bytes(row, own), row["redacted_with"], row["flags"])
                pk, own = next(by_trajectory, (None, []))
            else:
                yield ExportLine(record_bytes(row, []), row["redacted_with"], row["flags"])


# The columns _steps_by_trajectory reads, in the order it unpacks them.
EXPORT_STEP_COLUMNS = (
    "trajectory_id",
    "step",
    "action_type",
    "action_input",
    "observation",
    "observation_truncated",
    "thought",
    "reward",
    "reward_breakdown",
    "timestamp",
    "duration_ms",
    "exit_code",
    "extra",
)


def _steps_by_trajectory(trajectory_pks: list[int]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Each trajectory's steps in order, straight from one SQL query ordered by (trajectory, step);
    a trajectory without steps is not there.

    JSON columns are passed through as already-encoded text (orjson.Fragment) rather
    than decoded and encoded again, which was most of the export's time.
    """
    qn = connection.ops.quote_name
    postgres = connection.vendor == "postgresql"
    columns: list[str] = []
    for name in EXPORT_STEP_COLUMNS:
        column = f"{qn(name)}::text" if name in JSON_COLUMNS and postgres else qn(name)
        if name == "timestamp":
            columns.append(_stamp_column(qn(name), postgres))
        elif name in ("reward_breakdown", "extra"):
            # Nearly always empty: None from the driver costs no string to make and compare.
            columns.append(f"NULLIF({column}, '{EMPTY_OBJECT}')")
        else:
            columns.append(column)
    placeholders = ", ".join(["%s"] * len(trajectory_pks))
    sql = (
        f"SELECT {', '.join(columns)} FROM {qn(Step._meta.db_table)} "  # noqa: S608 - names are ours
        f"WHERE {qn('trajectory_id')} IN ({placeholders}) ORDER BY {qn('trajectory_id')}, {qn('step')}"
    )
    fragment, loads = orjson.Fragment, orjson.loads
    stamp = _as_is if postgres else _sqlite_stamp
    current: int | None = None
    steps: list[dict[str, Any]] = []
    with connection.cursor() as cursor:
        cursor.execute(sql, trajectory_pks)
        while rows := cursor.fetchmany(FETCH_ROWS):
            for pk, number, action, given, observed, cut, thought, reward, breakdown, time, ms, code, extra in rows:
                if pk != current:
                    if current is not None:
                        yield current, steps
                    current, steps = pk, []
                steps.append(
                    {
                        "step": number,
                        "action_type": action,
                        "action_input": None if given is None else fragment(given),
                        "observation": observed,
                        "observation_truncated": bool(cut),
                        "thought": thought,
                        "reward": reward,
                        "reward_breakdown": EMPTY_FRAGMENT if breakdown is None else fragment(breakdown),
                        "timestamp": stamp(time),
                        "duration_ms": ms,
                        "exit_code": code,
                        # Unknown keys are merged into the step object, so they must be decoded.
                        "extra": None if extra is None else loads(extra),
                    }
                )
    if current is not None:
        yield current, steps


def _as_is(value: str | None) -> str | None:
    return value


def _stamp_column(column: str, postgres: bool) -> str:
    """A step's time as the database gives it: on PostgreSQL already as the line writes it (ISO,
    UTC, "Z"); on SQLite as stored, not through the driver's datetime converter (parsing each
    time and formatting it back cost more than the rest of a step's export)."""
    if postgres:
        utc = f"{column} AT TIME ZONE 'UTC'"
        micro = f"CASE WHEN date_trunc('second', {column}) = {column} THEN '' ELSE to_char({utc}, '.US') END"
        return f"""to_char({utc}, 'YYYY-MM-DD"T"HH24:MI:SS') || {micro} || 'Z'"""
    return f"CAST({column} AS TEXT)"


def _sqlite_stamp(value: str | None) -> str | None:
    """SQLite's stored time, str() of the naive UTC time as Django wrote it, as format_time writes it."""
    if value is None:
        return None
    # "YYYY-MM-DD HH:MM:SS[.ffffff]" with a four-digit year is the same text with a "T"; anything
    # else goes the long way.
    if len(value) in (19, 26) and value[10] == " " and value[0] != "0" and not value.endswith(".000000"):
        return f"{value[:10]}T{value[11:]}Z"
    parsed = datetime.fromisoformat(value)
    return format_time(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))


class TaskPrompts:
    """What the policy was shown of each exported record's task, looked up once per task id: the
    statement (the record's own prompt for a task we do not hold) and the language its system
    prompt named (trajectories.agent.system_prompt)."""

    def __init__(self) -> None:
        self.known: dict[str, tuple[str, str]] = {}

    def _facts(self, record: dict[str, Any]) -> tuple[str, str]:
        task_id = record["task_id"]
        if task_id not in self.known:
            task = Task.objects.filter(task_id=task_id).only("statement", "metadata").first()
            self.known[task_id] = (task.statement, task.language) if task is not None else ("", PYTHON)
        return self.known[task_id]

    def __call__(self, record: dict[str, Any]) -> str:
        return self._facts(record)[0] or record.get("prompt") or ""

    def language(self, record: dict[str, Any]) -> str:
        return self._facts(record)[1]
