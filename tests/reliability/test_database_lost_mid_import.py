"""The database connection of a running JSONL import is killed from another connection (pg_terminate_backend).

import_trajectories promises one transaction per file: the import fails with a one-line error,
nothing of the file is stored, and running it again imports every trajectory once.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import orjson
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from trajectories.models import Step, Trajectory

pytestmark = pytest.mark.django_db(transaction=True)

TRAJECTORIES = 600
STEPS = 20  # 12,000 steps in chunks of 5,000: the first is written well before the end of the file


def write_jsonl(path: Path) -> None:
    with path.open("wb") as fh:
        for n in range(TRAJECTORIES):
            record = {
                "trajectory_id": str(uuid.UUID(int=n + 1)),
                "task_id": f"task_{n % 7:04d}",
                "steps": [
                    {
                        "step": i + 1,
                        "action_type": "run_command",
                        "action_input": {"command": f"echo {i}"},
                        "observation": f"{i}\n" * 20,
                    }
                    for i in range(STEPS)
                ],
                "termination": "submitted",
            }
            fh.write(orjson.dumps(record) + b"\n")


class ImportThread(threading.Thread):
    """The import command on a thread of its own, so on a database connection of its own."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            call_command("import_trajectories", str(self.path), "--allow-unknown-tasks", verbosity=0)
        except BaseException as exc:  # noqa: BLE001 - the test reads what the command raised
            self.error = exc
        finally:
            connection.close()


def writing_backend() -> int | None:
    """The importer's server process, once its transaction has written something."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL"
        )
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def test_a_database_connection_killed_mid_import_leaves_nothing_and_the_import_runs_again(tmp_path: Path) -> None:
    if connection.vendor != "postgresql":
        pytest.fail("this test kills a PostgreSQL backend: run it with DATABASE_URL=postgres://...")
    path = tmp_path / "large.jsonl"
    write_jsonl(path)
    importer = ImportThread(path)
    importer.start()
    deadline = time.monotonic() + 60
    while (pid := writing_backend()) is None:
        assert importer.is_alive(), importer.error
        assert time.monotonic() < deadline, "the import never started writing"
        time.sleep(0.01)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    importer.join(60)
    # What the command prints is "CommandError: <this>": one line that says what happened.
    assert isinstance(importer.error, CommandError), repr(importer.error)
    message = str(importer.error)
    assert "nothing was imported" in message and "\n" not in message, message
    assert Trajectory.objects.count() == 0 and Step.objects.count() == 0  # not one chunk of it stayed

    call_command("import_trajectories", str(path), "--allow-unknown-tasks", verbosity=0)
    assert Trajectory.objects.count() == TRAJECTORIES
    assert Step.objects.count() == TRAJECTORIES * STEPS
