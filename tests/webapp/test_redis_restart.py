"""Redis restarted in the middle of a batch: the worker lives, the rollout command waits, nothing is lost.

The shared Redis of the machine is never touched: the test starts its own redis-server on a
free port (no persistence, like `make run`'s), points a Celery worker and the `rollout`
command at it, and restarts that one while scoring jobs are in flight.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.db import connection
from django.db.models import Count

from tasks.services import import_task_dirs
from tests.conftest import DEMO, REPO
from trajectories.models import RolloutBatch

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TASKS = ("task_0001", "task_0002", "task_0003", "task_0004")
SAMPLES = 2
DOWN_SECONDS = 4.0


class PrivateRedis:
    def __init__(self, workdir: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # as a crash or `systemctl restart` under load would: no goodbye
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is missing: `make setup` installs it")
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


# The private Redis holds this instance's keys (queues, the unacked hash) under its name.
INSTANCE = "crucible-restart"


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as fh:
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)


def test_a_redis_restart_mid_batch_loses_and_doubles_nothing(private_redis: PrivateRedis, tmp_path: Path) -> None:
    started = time.monotonic()
    for task_id in TASKS:
        import_task_dirs(DEMO / "tasks" / task_id, "restart")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings_test",
        "CRUCIBLE_DB_NAME": str(connection.settings_dict["NAME"]),
        "CRUCIBLE_TEST_REDIS": private_redis.url,
        "REDIS_URL": private_redis.url,
        "CRUCIBLE_INSTANCE": INSTANCE,
    }
    # The worker as `make run` starts it: prefork, gossip, mingle and heartbeats on.
    worker_log, rollout_log = tmp_path / "worker.log", tmp_path / "rollout.log"
    worker = _spawn(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", "rewards", "--concurrency", "2"]
        + ["--loglevel", "INFO"],
        env,
        worker_log,
    )
    out = tmp_path / "out"
    rollout = _spawn(
        [sys.executable, "manage.py", "rollout", "--suite", "restart", "--policy", "scripted"]
        + ["--samples", str(SAMPLES), "--output-dir", str(out), "--score-timeout", "120"],
        env,
        rollout_log,
    )
    try:
        # Restart Redis while a scoring job is in flight on the worker (delivered, not yet
        # acknowledged): the moment that killed the worker with kombu's AttributeError.
        client = redis.Redis.from_url(private_redis.url)
        deadline = time.monotonic() + 60
        while not client.hlen(f"{INSTANCE}:unacked"):
            assert rollout.poll() is None, rollout_log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no scoring job was ever in flight"
            time.sleep(0.02)
        private_redis.stop()
        time.sleep(DOWN_SECONDS)
        private_redis.start()

        deadline = time.monotonic() + 120
        while rollout.poll() is None:
            # The worker must live through it: the rollout command waits for its scores.
            assert worker.poll() is None, worker_log.read_text()[-3000:]
            assert time.monotonic() < deadline, rollout_log.read_text()[-3000:]
            time.sleep(0.2)
        text = rollout_log.read_text()
        assert rollout.returncode == 0, text[-3000:]
        assert "waiting for Redis" in text and "carrying on" in text, text[-3000:]
        assert worker.poll() is None, worker_log.read_text()[-3000:]
    finally:
        for proc in (rollout, worker):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
    worker_text = worker_log.read_text()
    assert "Unrecoverable error" not in worker_text, worker_text[-3000:]
    assert "Connection to broker lost" in worker_text  # the worker did see the restart, and lived

    batch = RolloutBatch.objects.get()
    rows = batch.trajectories.all()
    assert rows.count() == len(TASKS) * SAMPLES
    assert set(rows.values_list("status", flat=True)) == {"finished"}
    assert rows.filter(scored_at=None).count() == 0
    pairs = list(rows.values("task_ref", "sample_index").annotate(n=Count("id")).values_list("n", flat=True))
    assert pairs == [1] * len(TASKS) * SAMPLES
    assert batch.status == RolloutBatch.Status.SUCCEEDED
    lines = [json.loads(line) for line in (out / f"batch-{batch.pk}.jsonl").read_text().splitlines()]
    assert len(lines) == len({line["trajectory_id"] for line in lines}) == len(TASKS) * SAMPLES
    assert all(line["final_reward"] is not None for line in lines)
    assert time.monotonic() - started < 120


def test_a_batch_launched_from_the_web_survives_a_redis_restart_that_empties_its_queue(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    """The worker runs the batch; the restart takes the queued rollouts with it; they come back."""
    for task_id in TASKS:
        import_task_dirs(DEMO / "tasks" / task_id, "web-restart")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings_test",
        "CRUCIBLE_DB_NAME": str(connection.settings_dict["NAME"]),
        "CRUCIBLE_TEST_REDIS": private_redis.url,
        "REDIS_URL": private_redis.url,
        "CRUCIBLE_INSTANCE": INSTANCE,
    }
    worker_log = tmp_path / "worker.log"
    worker = _spawn(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", "rollouts", "--concurrency", "2"]
        + ["--loglevel", "INFO"],
        env,
        worker_log,
    )
    try:
        # Launched as the web server would: a batch row, then its jobs on the (private) broker.
        launch = "from tasks.models import TaskSuite; from trajectories.batches import start_batch; "
        launch += "from trajectories.rollout_settings import RolloutSettings; "
        launch += (
            f"start_batch(TaskSuite.objects.get(name='web-restart'), RolloutSettings('scripted', samples={SAMPLES}))"
        )
        subprocess.run([sys.executable, "manage.py", "shell", "-c", launch], cwd=REPO, env=env, check=True)
        client = redis.Redis.from_url(private_redis.url)
        deadline = time.monotonic() + 60
        while not (client.hlen(f"{INSTANCE}:unacked") and client.llen(f"{INSTANCE}:rollouts")):
            assert time.monotonic() < deadline, "never a rollout in flight with others waiting"
            time.sleep(0.02)
        private_redis.stop()  # the waiting rollouts go with it: no persistence
        time.sleep(DOWN_SECONDS)
        private_redis.start()

        batch = RolloutBatch.objects.get()
        deadline = time.monotonic() + 90
        while batch.status not in ("succeeded", "failed"):
            assert worker.poll() is None, worker_log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"batch stuck {batch.status}: " + worker_log.read_text()[-2000:]
            time.sleep(0.3)
            batch.refresh_from_db()
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
    text = worker_log.read_text()
    assert "Unrecoverable error" not in text and "enqueued again" in text, text[-3000:]
    rows = batch.trajectories.all()
    assert batch.status == "succeeded" and rows.count() == len(TASKS) * SAMPLES
    assert set(rows.values_list("status", flat=True)) == {"finished"}
    counts = rows.values("task_ref", "sample_index").annotate(n=Count("id")).values_list("n", flat=True)
    assert list(counts) == [1] * len(TASKS) * SAMPLES
    for trajectory in rows:  # each ran to one clean record: steps 1..n, none doubled
        numbers = list(trajectory.steps.order_by("step").values_list("step", flat=True))
        assert numbers == list(range(1, trajectory.step_count + 1))
