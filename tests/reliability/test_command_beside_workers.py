"""The `rollout` command beside workers on the same broker: a worker that starts mid-batch (and finds
the command's queued rows, which were never in the broker) runs none of them twice, and the command
takes no row a worker holds. Every trajectory is one attempt, steps 1..n; the command exits 0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection

from tasks.services import import_task_dirs
from tests.conftest import DEMO, REPO
from tests.reliability.conftest import Worker, wait_for
from trajectories.models import RolloutBatch, Step, Trajectory

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TASKS = ("task_0001", "task_0002", "task_0003", "task_0004")
SAMPLES = 2
ENV = {"CRUCIBLE_ROLLOUT_STALE_S": "5", "CRUCIBLE_SWEEP_S": "1", "CRUCIBLE_LOST_AFTER_S": "1"}


def test_a_worker_started_mid_batch_runs_none_of_the_commands_rollouts_twice(
    workers: Callable[..., Worker], tmp_path: Path
) -> None:
    for task_id in TASKS:
        import_task_dirs(DEMO / "tasks" / task_id, "beside")
    env = {
        **os.environ,
        **ENV,
        "DJANGO_SETTINGS_MODULE": "webapp.settings_test",
        "CRUCIBLE_DB_NAME": str(connection.settings_dict["NAME"]),
    }
    log = tmp_path / "rollout.log"
    argv = [sys.executable, "manage.py", "rollout", "--suite", "beside", "--policy", "scripted"]
    argv += ["--samples", str(SAMPLES), "--output-dir", str(tmp_path / "out"), "--score-timeout", "240"]
    with log.open("wb") as out:
        command = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: Trajectory.objects.filter(status="finished").exists(), 120, "the command's first rollout")
        # Mid-batch, a worker of the same deployment starts: at boot it looks for queued rollouts the
        # broker lost, and it sweeps every second.
        worker = workers("rollouts,rewards", "--pool", "solo", env=ENV)
        assert command.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        if command.poll() is None:
            command.kill()
    text = log.read_text() + worker.tail(50000)
    assert "IntegrityError" not in text and "Traceback" not in log.read_text(), text[-3000:]
    batch = RolloutBatch.objects.get()
    assert batch.status == RolloutBatch.Status.SUCCEEDED
    rows = batch.trajectories.all()
    assert rows.count() == len(TASKS) * SAMPLES
    assert set(rows.values_list("attempt", flat=True)) == {1}  # nobody ran a row a second time
    for trajectory in rows:
        numbers = list(Step.objects.filter(trajectory=trajectory).order_by("step").values_list("step", flat=True))
        assert numbers == list(range(1, trajectory.step_count + 1))
        assert trajectory.status == "finished" and trajectory.success is True
    # The worker ran no rollout of the command's: it only scored them.
    assert "rollout of trajectory row" not in worker.tail(50000)


def test_on_sqlite_the_command_beside_a_two_process_worker_meets_no_locked_database(tmp_path: Path) -> None:
    """The embedded default of `make run`: SQLite, a worker with two processes, the command beside it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRUCIBLE_", "DJANGO_", "DATABASE_URL"))}
    env |= {
        **ENV,
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'crucible.sqlite3'}",
        "CRUCIBLE_VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": os.environ["REDIS_URL"],
        "HF_HUB_OFFLINE": "1",
    }
    (tmp_path / "var").mkdir()

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
        )

    assert manage("migrate", "--no-input", "-v0").returncode == 0
    # One import of the four tasks (a folder of task folders), not a process start each.
    tasks = tmp_path / "tasks"
    for task_id in TASKS:
        shutil.copytree(DEMO / "tasks" / task_id, tasks / task_id)
    assert manage("import_tasks", str(tasks), "--suite", "sqlite").returncode == 0
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", "rollouts,rewards"]
            + ["--concurrency", "2", "--loglevel", "INFO"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        done = manage(
            "rollout", "--suite", "sqlite", "--policy", "scripted", "--samples", str(SAMPLES),
            "--output-dir", str(tmp_path / "out"), "--score-timeout", "300",
        )  # fmt: skip
    finally:
        os.killpg(worker.pid, 9)
        worker.wait(timeout=30)
    text = done.stdout + done.stderr + log.read_text()
    assert done.returncode == 0, text[-3000:]
    assert "database is locked" not in text and "IntegrityError" not in text, text[-3000:]
    assert f"{len(TASKS) * SAMPLES} done, 0 left" in done.stdout
    lines = (tmp_path / "out").glob("*.jsonl")
    assert sum(len(path.read_text().splitlines()) for path in lines) == len(TASKS) * SAMPLES
