"""Fast insertion of trajectories and steps: binary COPY on PostgreSQL, executemany elsewhere.

Steps are the one table that grows by hundreds of thousands of rows per import;
building a Django model instance per row costs more than the database's own work,
so rows go in as tuples in the column order below. An import's trajectories go in the
same way: bulk_create compiles SQL for every field of every row, which cost more than
inserting a hundred steps.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import orjson
from django.db import connection, models
from django.utils import timezone
from psycopg import postgres
from psycopg.adapt import Dumper
from psycopg.pq import Format

from trajectories.models import Step, Trajectory
from trajectories.schema import StepRecord

# Smaller imports leave the planner's statistics to autovacuum (an ANALYZE costs ~0.1 s).
MIN_STEPS_TO_ANALYZE = 10_000
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


def _db_time() -> Callable[[datetime | None], Any]:
    """What the database is given for a datetime: what Django's own adapter gives, without its per-call cost."""
    if connection.vendor == "postgresql":
        return lambda value: value  # the driver sends an aware datetime as it is
    zone = connection.timezone

    def adapt(value: datetime | None) -> str | None:
        if value is None:
            return None
        # SQLite keeps naive text in the connection's zone (UTC), as adapt_datetimefield_value does.
        if value.tzinfo is not None:
            value = (value if value.tzinfo is zone else value.astimezone(zone)).replace(tzinfo=None)
        return str(value)

    return adapt


class _JsonbText(Dumper):
    """JSON text encoded already (by orjson) as jsonb's binary form: a version byte, then the text."""

    format = Format.BINARY
    oid = postgres.types["jsonb"].oid

    def dump(self, obj: str) -> bytes:
        return b"\x01" + obj.encode()


def _insert(model: type[models.Model], columns: Iterable[str], rows: list[tuple[Any, ...]]) -> None:
    table = connection.ops.quote_name(model._meta.db_table)
    columns = list(columns)
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Binary COPY: the server parses no text and the driver formats in C (a third less time
            # than text COPY for 100k steps, most of the client's share). The types are the columns'.
            by_column = {f.column: f for f in model._meta.concrete_fields}
            types = [str(by_column[c].db_type(connection)).split("(")[0] for c in columns]
            # COPY goes through the driver's own cursor, outside Django's error wrapping: a connection
            # lost mid-copy must still be django.db's OperationalError, like any other query's.
            with connection.wrap_database_errors:
                raw = cursor.cursor  # type: ignore[attr-defined]
                raw.adapters.register_dumper(None, _JsonbText)
                with raw.copy(f"COPY {table} ({quoted}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(types)
                    for row in rows:
                        copy.write_row(row)
            return
        placeholders = ", ".join(["%s"] * len(rows[0]))
        cursor.executemany(f"INSERT INTO {table} ({quoted}) VALUES ({placeholders})", rows)  # noqa: S608


def insert_steps(rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    if connection.vendor != "postgresql":
        adapt = _db_time()
        stamp = STEP_COLUMNS.index("timestamp")
        rows = [(*row[:stamp], adapt(row[stamp]), *row[stamp + 1 :]) for row in rows]
    _insert(Step, STEP_COLUMNS, rows)


def _to_db(field: models.Field[Any, Any]) -> Callable[[Any], Any]:
    """How one field's value is written, as the field's get_db_prep_save would write it."""
    if isinstance(field, models.JSONField):
        return _json
    if isinstance(field, models.UUIDField) and not connection.features.has_native_uuid_field:
        return lambda value: None if value is None else uuid.UUID(str(value)).hex
    if isinstance(field, models.DateTimeField):
        return _db_time()
    return lambda value: value


def insert_trajectories(rows: list[dict[str, Any]]) -> list[int]:
    """Insert trajectories given as {field attname: value}, every row the same fields, the others
    at the model's defaults; returns their primary keys, in order. The rows' trajectory_ids must
    be new (they are what the keys are read back by)."""
    if not rows:
        return []
    given = list(rows[0])
    fields = {f.attname: f for f in Trajectory._meta.concrete_fields if not f.primary_key}
    now = timezone.now()
    defaults = {
        name: _to_db(f)(now if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False) else f.get_default())
        for name, f in fields.items()
        if name not in given
    }
    writers = [_to_db(fields[name]) for name in given]
    constant = tuple(defaults.values())
    _insert(
        Trajectory,
        [str(fields[name].column) for name in [*given, *defaults]],
        [tuple(write(row[name]) for write, name in zip(writers, given, strict=True)) + constant for row in rows],
    )
    key = _to_db(fields["trajectory_id"])
    ids = [key(row["trajectory_id"]) for row in rows]
    placeholders = ", ".join(["%s"] * len(ids))
    qn = connection.ops.quote_name
    table = qn(Trajectory._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {qn('trajectory_id')}, {qn('id')} FROM {table} WHERE {qn('trajectory_id')} IN ({placeholders})",  # noqa: S608
            ids,
        )
        pks = {key(ident): pk for ident, pk in cursor.fetchall()}
    return [pks[ident] for ident in ids]


def refresh_statistics(steps_added: int) -> None:
    """Have PostgreSQL's planner count what an import added, once it is a tenth of the steps or more.

    Right after a bulk import the statistics still describe the tables before it (or none, for a
    first import), and the next reads plan on them: an export's page of 5,000 steps went to a
    parallel scan of the whole table and a sort, 40 ms a page instead of 4. Autovacuum applies
    the same one-tenth rule, but up to a minute later; the import does it in its transaction.
    """
    if connection.vendor != "postgresql" or steps_added < MIN_STEPS_TO_ANALYZE:
        return
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [Step._meta.db_table])
        (counted,) = cursor.fetchone() or (-1,)
        if counted < 0 or steps_added >= 0.1 * counted:
            # Steps are found by their trajectory: those columns are all a plan needs, and leaving
            # out the texts makes it a quarter of the time (autovacuum analyzes the rest later).
            steps = f"{qn(Step._meta.db_table)} ({qn('trajectory_id')}, {qn('step')})"
            cursor.execute(f"ANALYZE {qn(Trajectory._meta.db_table)}, {steps}")
