"""The import's raw writes and the export's SQL-side shortcuts give what the ORM and format_time give.

Trajectories go in as rows of one statement per chunk (COPY on PostgreSQL), steps' times come out
formatted as stored, and the export's pages of trajectories and steps are cut where the steps
reach a page's size. Each shortcut is held to the plain way of doing the same thing.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from core.redaction import rules_version
from core.vocabulary import TrajectoryStatus
from tasks.models import Task
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from trajectories import exports
from trajectories.exports import iter_trajectory_lines
from trajectories.models import Step, Trajectory, duplicate_rate
from trajectories.schema import format_time, parse_time
from trajectories.services import import_trajectories

pytestmark = pytest.mark.django_db


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def step(n: int, **fields: Any) -> dict[str, Any]:
    return {"step": n, "action_type": "run_command", "action_input": {"command": f"echo {n}"}, **fields}


def test_an_imported_trajectory_row_has_what_the_model_would_give_it(tmp_path: Path) -> None:
    import_task_dirs(DEMO / "tasks" / "task_0001", "demo")
    task = Task.objects.get(task_id="task_0001")
    ident = uuid.uuid4()
    steps = [step(1), step(2, action_input={"command": "echo 1"}), step(3)]
    record = {"trajectory_id": str(ident), "task_id": "task_0001", "steps": steps, "prompt": "Fix it.", "x": [1]}
    before = timezone.now()
    import_trajectories(write(tmp_path / "one.jsonl", [record]))

    row = Trajectory.objects.get(trajectory_id=ident)
    assert (row.task_id, row.suite_id) == (task.pk, task.suite_id)
    assert (row.status, row.attempt, row.error, row.batch_id, row.sample_index) == (
        TrajectoryStatus.FINISHED,
        0,
        "",
        None,
        None,
    )
    assert (row.flags, row.replay_report, row.claimed, row.extra) == ([], {}, {}, {"x": [1]})
    assert (row.final_reward, row.success, row.scored_spec, row.scored_at) == (None, None, "", None)
    assert row.step_count == 3 and row.redacted_with == rules_version() and row.prompt == "Fix it."
    assert row.duplicate_rate == duplicate_rate([(s["action_type"], s["action_input"]) for s in steps]) == 0.3333
    assert before <= row.imported_at <= timezone.now() and before <= row.created_at <= timezone.now()
    assert list(Step.objects.filter(trajectory=row).values_list("step", flat=True)) == [1, 2, 3]


TIMES = [
    "2025-06-01T10:00:01Z",
    "2025-06-01T10:00:01.500000Z",
    "2025-06-01T10:00:01.000001+02:00",  # another zone: stored and written in UTC
    "1999-12-31T23:59:59.999999",  # no zone: taken as UTC
    "1000-01-01T00:00:00Z",
    None,
]


def test_step_times_are_exported_as_format_time_writes_them(tmp_path: Path) -> None:
    times = list(TIMES)
    if connection.vendor == "sqlite":
        # Stored as "0999-..."; strftime writes "999": the export goes the long way to say the same.
        times.append("0999-03-04T05:06:07Z")
    steps = [step(n + 1, timestamp=time) for n, time in enumerate(times)]
    import_trajectories(write(tmp_path / "t.jsonl", [{"task_id": "t", "steps": steps}]), allow_unknown_tasks=True)
    (line,) = iter_trajectory_lines()
    written = [s["timestamp"] for s in json.loads(line)["steps"]]
    assert written == [format_time(parse_time(time, 1, "t")) for time in times]


def test_pages_of_the_export_carry_every_trajectory_once_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of at most 4 trajectories and 3 steps: trajectories fetched beyond a page's steps wait
    # for the next page, one longer than a page is a page of its own, one without steps is written too.
    monkeypatch.setattr(exports, "CHUNK_TRAJECTORIES", 4)
    monkeypatch.setattr(exports, "CHUNK_STEPS", 3)
    counts = [2, 0, 1, 5, 1, 1, 1, 0, 3, 2]
    start = datetime(2025, 1, 1, tzinfo=UTC)
    records = [
        {
            "trajectory_id": str(uuid.UUID(int=i + 1)),
            "task_id": f"t{i}",
            "created_at": (start + timedelta(minutes=i)).isoformat(),
            "steps": [step(n + 1, observation=f"{i}.{n}") for n in range(count)],
        }
        for i, count in enumerate(counts)
    ]
    import_trajectories(write(tmp_path / "p.jsonl", records), allow_unknown_tasks=True)
    lines = [json.loads(line) for line in iter_trajectory_lines()]
    assert [line["task_id"] for line in lines] == [f"t{i}" for i in range(len(counts))]
    assert [[s["observation"] for s in line["steps"]] for line in lines] == [
        [f"{i}.{n}" for n in range(count)] for i, count in enumerate(counts)
    ]


def test_a_large_import_leaves_postgresql_planning_on_its_rows(tmp_path: Path) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("planner statistics are PostgreSQL's (SQLite plans the export on its index)")
    records = [{"task_id": "t", "steps": [step(n + 1) for n in range(100)], "prompt": str(i)} for i in range(120)]
    import_trajectories(write(tmp_path / "big.jsonl", records), allow_unknown_tasks=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [Step._meta.db_table])
        (counted,) = cursor.fetchone()
    assert counted == 12_000
