"""A scripted batch on a busy machine: the `rollout` command and a real worker while eight processes
burn the CPU beside them (a shared laptop or CI box at load 10+ on 2 cores). Every trajectory is
solved once, none is taken for a dead worker's, and the command exits 0.

The stale window is cut to a few seconds, so that a heartbeat that depends on the machine being
quiet (beats counted in polls, a beat that waits behind a step) would show here as a take-over.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

from tasks.services import import_task_dirs
from tests.conftest import DEMO, REPO
from tests.reliability.conftest import Worker
from trajectories.models import RolloutBatch, Step

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Four rollouts, each several stale windows long under the burners: what a heartbeat that needs a
# quiet machine would fail on. More only burn the CPU the rest of the suite runs on for longer.
TASKS = ("task_0001", "task_0002")
SAMPLES = 2
BURNERS = 8
ENV = {"CRUCIBLE_ROLLOUT_STALE_S": "4", "CRUCIBLE_SWEEP_S": "1", "CRUCIBLE_LOST_AFTER_S": "30"}


def running_now() -> int:
    """Processes and threads ready to run this instant (/proc/loadavg's fourth field)."""
    return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])


@pytest.fixture
def burners() -> Iterator[list[int]]:
    """Eight busy loops and what the scheduler saw while they ran: runnable counts, sampled."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(BURNERS)]
    samples: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            samples.append(running_now())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join()
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_scripted_batch_under_load_solves_every_trajectory_once_and_the_command_exits_0(
    workers: Callable[..., Worker], burners: list[int], tmp_path: Path
) -> None:
    for task_id in TASKS:
        import_task_dirs(DEMO / "tasks" / task_id, "loaded")
    worker = workers("rollouts,rewards", "--pool", "solo", env=ENV)
    env = {
        **os.environ,
        **ENV,
        "DJANGO_SETTINGS_MODULE": "webapp.settings_test",
        "CRUCIBLE_DB_NAME": str(connection.settings_dict["NAME"]),
    }
    argv = [sys.executable, "manage.py", "rollout", "--suite", "loaded", "--policy", "scripted"]
    argv += ["--samples", str(SAMPLES), "--output-dir", str(tmp_path / "out"), "--score-timeout", "600"]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    took = time.monotonic() - started
    load = os.getloadavg()[0]
    print(f"under load: {took:.1f} s, runnable max {max(burners)}, 1-min load average {load:.1f}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert max(burners) >= BURNERS + 1, burners  # the machine really was that busy
    batch = RolloutBatch.objects.get()
    assert batch.status == RolloutBatch.Status.SUCCEEDED
    rows = batch.trajectories.all()
    assert rows.count() == len(TASKS) * SAMPLES
    assert set(rows.values_list("attempt", flat=True)) == {1}  # no live rollout taken for a dead one
    for trajectory in rows:
        assert trajectory.status == "finished" and trajectory.success is True and trajectory.termination == "submitted"
        numbers = list(Step.objects.filter(trajectory=trajectory).order_by("step").values_list("step", flat=True))
        assert numbers == list(range(1, trajectory.step_count + 1))
    assert "IntegrityError" not in done.stderr + worker.tail(50000)
    assert "no heartbeat" not in worker.tail(50000)
