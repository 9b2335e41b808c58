"""The measured half of bench/jsonl_io.py, run in a fresh process so its peak RSS is the command's own:

    python -m bench._jsonl_io_child import|export|clear|raw_import|raw_export PATH

`import` and `export` are Crucible's commands. `raw_import` and `raw_export` are the floors they
are held to: the same work written bare, without Django. The raw writer parses each line, checks
it with the same trajectories.schema, redacts the same fields with the same core.redaction rules
(one call per field, the plain way) and writes the same rows into the same tables (executemany on
SQLite, COPY on PostgreSQL) in one transaction; the raw export is one ordered SELECT per table and
orjson, giving the same lines. Modules are imported before the clock starts, on both sides.

Prints: seconds, the RSS after setup (KiB), the peak RSS (KiB), and the CPU seconds this process spent
(which, on a busy machine, is what its wall clock hides; a database server's share is not in it).
"""

from __future__ import annotations

import os
import resource
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg

from core.redaction import redact_patch, redact_record, redact_text, rules_version
from trajectories.schema import check_record, format_time

LINE_LIMIT = 33554432  # CRUCIBLE_MAX_JSONL_LINE_BYTES's default
CHUNK = 500
TRAJECTORY = "trajectories_trajectory"
TASK = "tasks_task"
STEP = "trajectories_step"
TRAJECTORY_COLUMNS = (
    "trajectory_id, status, attempt, error, schema_version, task_ref, task_id, suite_id, task_version, "
    "base_commit, prompt, policy, policy_kind, policy_model, sandbox, patch, termination, flags, scored_spec, "
    "claimed, source, step_count, duplicate_rate, replay_report, extra, redacted_with, created_at, imported_at"
)
STEP_COLUMNS = (
    "trajectory_id, step, action_type, action_input, observation, observation_truncated, thought, reward, "
    "reward_breakdown, timestamp, duration_ms, exit_code, extra"
)


def main(argv: list[str]) -> int:
    op, path = argv
    url = os.environ["DATABASE_URL"]
    if op in ("raw_import", "raw_export"):
        run = raw_import if op == "raw_import" else raw_export
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started, cpu = time.perf_counter(), time.process_time()
        run(path, url)
    else:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
        import django

        django.setup()
        from django.core.management import call_command, get_commands, load_command_class

        # Modules are imported before the clock starts, as the floors' are.
        for name in ("import_trajectories", "export"):
            load_command_class(get_commands()[name], name)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started, cpu = time.perf_counter(), time.process_time()
        if op == "import":
            call_command("import_trajectories", path, "--allow-unknown-tasks", verbosity=0)
        elif op == "export":
            call_command("export", "trajectories", "--out", path, verbosity=0)
        elif op == "clear":
            from trajectories.models import Step, Trajectory

            Step.objects.all().delete()
            Trajectory.objects.all().delete()
        else:
            raise SystemExit(f"unknown operation {op!r} (import, export, clear, raw_import or raw_export)")
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(elapsed, base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, cpu)
    return 0


class Database:
    """The few calls the floors need, on a bare sqlite3 or psycopg connection."""

    def __init__(self, url: str) -> None:
        self.postgres = not url.startswith("sqlite:")
        if self.postgres:
            self.conn: Any = psycopg.connect(url)
        else:
            # Django's pragmas for this file; no detect_types, so times and JSON come back as text.
            self.conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
            self.conn.execute("PRAGMA synchronous=NORMAL")

    def begin(self) -> None:
        if not self.postgres:
            self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.conn.commit() if self.postgres else self.conn.execute("COMMIT")

    def uuid(self, value: uuid.UUID) -> Any:
        return value if self.postgres else value.hex  # Django keeps a UUID as 32 hex digits on SQLite

    def stamp(self, value: datetime | None) -> Any:
        # SQLite keeps naive UTC text, as Django writes it; psycopg takes the aware datetime.
        return value if self.postgres or value is None else str(value.astimezone(UTC).replace(tzinfo=None))

    def select(self, sql: str, values: list[Any]) -> list[tuple[Any, ...]]:
        """`sql` ending in "IN ", for these values."""
        mark = "%s" if self.postgres else "?"
        return list(self.conn.execute(f"{sql}({', '.join([mark] * len(values))})", values)) if values else []

    def column(self, sql: str, values: list[Any]) -> set[Any]:
        return {row[0] for row in self.select(sql, values)}

    def stream(self, sql: str) -> Iterator[tuple[Any, ...]]:
        cursor = self.conn.cursor("export") if self.postgres else self.conn.cursor()  # server-side on PostgreSQL
        cursor.execute(sql)
        while batch := cursor.fetchmany(2000):
            yield from batch

    def insert(self, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        if self.postgres:
            with self.conn.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("?" * (columns.count(",") + 1))
            self.conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)  # noqa: S608


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _json_or_none(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _redact(record: dict[str, Any]) -> int:
    """The fields the import redacts, one call per field (findings counted, as the audit needs)."""
    found = 0
    for name in ("prompt", "policy_model"):
        record[name], hits = redact_text(record[name], f"trajectory.{name}")
        found += len(hits)
    for name in ("policy", "sandbox", "extra", "claimed"):
        record[name], hits = redact_record(record[name], f"trajectory.{name}")
        found += len(hits)
    record["patch"], hits = redact_patch(record["patch"], "trajectory.patch")
    found += len(hits)
    for index, step in enumerate(record["steps"]):
        for name in ("observation", "thought"):
            step[name], hits = redact_text(step[name], f"trajectory.steps[{index}].{name}")
            found += len(hits)
        for name in ("action_input", "extra"):
            step[name], hits = redact_record(step[name], f"trajectory.steps[{index}].{name}")
            found += len(hits)
    return found


def _duplicate_rate(steps: list[dict[str, Any]]) -> float:
    keys = [s["action_type"] + orjson.dumps(s["action_input"], option=orjson.OPT_SORT_KEYS).decode() for s in steps]
    return round((len(keys) - len(set(keys))) / len(keys), 4) if keys else 0.0


def raw_import(path: str, url: str) -> None:
    db = Database(url)
    writer = RawWriter(db)
    db.begin()
    with open(path, "rb") as fh:
        for lineno, line in enumerate(iter(lambda: fh.readline(LINE_LIMIT + 1), b""), 1):
            if len(line) > LINE_LIMIT or b"\\u0000" in line:
                raise SystemExit(f"line {lineno}: too long, or a NUL (the bench's file has neither)")
            if line.strip():
                record = check_record(orjson.loads(line), lineno, line)
                _redact(record)
                writer.add(record)
    writer.flush()
    db.commit()


class RawWriter:
    """Chunks of records as rows: trajectories first (their ids), then their steps."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.chunk: list[dict[str, Any]] = []
        self.seen: set[Any] = set()
        self.now, self.version = datetime.now(UTC), rules_version()

    def add(self, record: dict[str, Any]) -> None:
        self.chunk.append(record)
        if len(self.chunk) == CHUNK:
            self.flush()

    def flush(self) -> None:
        db, chunk, self.chunk = self.db, self.chunk, []
        if not chunk:
            return
        ids = [db.uuid(r["trajectory_id"]) for r in chunk]
        self.seen.update(db.column(f"SELECT trajectory_id FROM {TRAJECTORY} WHERE trajectory_id IN ", ids))  # noqa: S608
        refs = sorted({r["task_ref"] for r in chunk})
        found = db.select(f"SELECT task_id, id, suite_id FROM {TASK} WHERE task_id IN ", refs)  # noqa: S608
        tasks = {task: (pk, suite) for task, pk, suite in found}
        rows, fresh = [], []
        for record, ident in zip(chunk, ids, strict=True):
            if ident not in self.seen:
                self.seen.add(ident)
                fresh.append(record)
                rows.append(self.trajectory_row(ident, record, *tasks.get(record["task_ref"], (None, None))))
        db.insert(TRAJECTORY, TRAJECTORY_COLUMNS, rows)
        made = db.select(f"SELECT trajectory_id, id FROM {TRAJECTORY} WHERE trajectory_id IN ", [r[0] for r in rows])  # noqa: S608
        pks = dict(made)
        steps = [self.step_row(pks[row[0]], s) for row, r in zip(rows, fresh, strict=True) for s in r["steps"]]
        db.insert(STEP, STEP_COLUMNS, steps)

    def trajectory_row(self, ident: Any, r: dict[str, Any], task: int | None, suite: str | None) -> tuple[Any, ...]:
        stamp = self.db.stamp
        return (
            ident, "finished", 0, "", 1, r["task_ref"], task, suite, r["task_version"], r["base_commit"], r["prompt"],
            _json(r["policy"]), r["policy_kind"], r["policy_model"], _json(r["sandbox"]), r["patch"], r["termination"],
            "[]", "", _json(r["claimed"]), r["source"], len(r["steps"]), _duplicate_rate(r["steps"]), "{}",
            _json(r["extra"]), self.version, stamp(r["created_at"] or self.now), stamp(self.now),
        )  # fmt: skip

    def step_row(self, pk: int, s: dict[str, Any]) -> tuple[Any, ...]:
        return (
            pk, s["step"], s["action_type"], _json_or_none(s["action_input"]), s["observation"],
            s["observation_truncated"], s["thought"], s["reward"], _json(s["reward_breakdown"]),
            self.db.stamp(s["timestamp"]), s["duration_ms"], s["exit_code"], _json(s["extra"]),
        )  # fmt: skip


def raw_export(path: str, url: str) -> None:
    db = Database(url)
    text = "::text" if db.postgres else ""
    stamp = (
        """to_char(s.timestamp AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')""" if db.postgres else "s.timestamp"
    )
    trajectories = db.stream(
        f"SELECT id, schema_version, trajectory_id, task_ref, task_version, base_commit, prompt, policy{text}, "  # noqa: S608
        f"sandbox{text}, patch, final_reward, success, termination, flags{text}, source, created_at, claimed{text}, "
        f"extra{text} FROM {TRAJECTORY} WHERE status = 'finished' ORDER BY id"
    )
    steps = Database(url).stream(
        f"SELECT s.trajectory_id, s.step, s.action_type, s.action_input{text}, s.observation, "  # noqa: S608
        f"s.observation_truncated, s.thought, s.reward, s.reward_breakdown{text}, {stamp}, s.duration_ms, "
        f"s.exit_code, s.extra{text} FROM {STEP} s JOIN {TRAJECTORY} t ON t.id = s.trajectory_id "
        "WHERE t.status = 'finished' ORDER BY s.trajectory_id, s.step"
    )
    pending = next(steps, None)
    with open(f"{path}.part", "wb") as out:
        for pk, version, ident, *fields in trajectories:
            own = []
            while pending is not None and pending[0] == pk:
                own.append(_step_out(pending))
                pending = next(steps, None)
            out.write(orjson.dumps(_record_out(version, ident, own, *fields)) + b"\n")
    os.replace(f"{path}.part", path)


def _time(value: str | datetime | None) -> str | None:
    if isinstance(value, datetime):
        return format_time(value)
    # SQLite's "YYYY-MM-DD HH:MM:SS[.ffffff]" (UTC) or PostgreSQL's to_char text.
    return None if value is None else value.replace(" ", "T").removesuffix(".000000") + "Z"


def _step_out(row: tuple[Any, ...]) -> dict[str, Any]:
    _, number, action, action_input, observation, truncated, thought, reward, breakdown, stamp, ms, code, extra = row
    step = {
        "step": number,
        "action_type": action,
        "action_input": None if action_input is None else orjson.Fragment(action_input),
        "observation": observation,
        "observation_truncated": bool(truncated),
        "thought": thought,
        "reward": reward,
        "reward_breakdown": orjson.Fragment(breakdown),
        "timestamp": _time(stamp),
        "duration_ms": ms,
        "exit_code": code,
    }
    if extra != "{}":
        step.update({k: v for k, v in orjson.loads(extra).items() if k not in step})
    return step


def _record_out(version: int, ident: Any, steps: list[dict[str, Any]], *fields: Any) -> dict[str, Any]:
    task_ref, task_version, base_commit, prompt, policy, sandbox, patch, reward, success = fields[:9]
    termination, flags, source, created_at, claimed, extra = fields[9:]
    record = {
        "schema_version": version,
        "trajectory_id": str(ident if isinstance(ident, uuid.UUID) else uuid.UUID(ident)),
        "task_id": task_ref,
        "task_version": task_version,
        "base_commit": base_commit,
        "prompt": prompt,
        "policy": orjson.loads(policy),
        "sandbox": orjson.loads(sandbox),
        "steps": steps,
        "patch": patch,
        "final_reward": reward,
        "success": None if success is None else bool(success),
        "termination": termination,
        "flags": orjson.loads(flags),
        "source": source,
        "created_at": _time(created_at),
    }
    if claimed not in ("{}", None):
        record["claimed"] = orjson.loads(claimed)
    if extra != "{}":
        record.update({k: v for k, v in orjson.loads(extra).items() if k not in record})
    return record


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
