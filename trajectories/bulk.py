"""Fast insertion of steps: COPY on PostgreSQL, executemany elsewhere.

Steps are the one table that grows by hundreds of thousands of rows per import;
building a Django model instance per row costs more than the database's own work,
so rows go in as tuples in the column order below.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.db import connection

from trajectories.models import Step
from trajectories.schema import StepRecord

STEP_COLUMNS = (
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


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def step_row(trajectory_pk: int, step: StepRecord) -> tuple[Any, ...]:
    return (
        trajectory_pk,
        step["step"],
        step["action_type"],
        _json(step["action_input"]),
        step["observation"],
        step["observation_truncated"],
        step["thought"],
        step["reward"],
        _json(step["reward_breakdown"]),
        step["timestamp"],
        step["duration_ms"],
        step["exit_code"],
        _json(step["extra"]),
    )


def insert_steps(rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    table = connection.ops.quote_name(Step._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in STEP_COLUMNS)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # COPY goes through the driver's own cursor, outside Django's error wrapping: a connection
            # lost mid-copy must still be django.db's OperationalError, like any other query's.
            with connection.wrap_database_errors:
                with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:  # type: ignore[attr-defined]
                    for row in rows:
                        copy.write_row(row)
            return
        adapt = connection.ops.adapt_datetimefield_value
        stamp = STEP_COLUMNS.index("timestamp")
        prepared = [(*row[:stamp], adapt(row[stamp]), *row[stamp + 1 :]) for row in rows]
        placeholders = ", ".join(["%s"] * len(STEP_COLUMNS))
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", prepared)  # noqa: S608
