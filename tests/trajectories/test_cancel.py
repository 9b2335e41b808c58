"""Cancel stops a running trajectory within seconds, even in the middle of a long step, and stays."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, start_worker
from trajectories.batches import cancel_batch, start_batch
from trajectories.models import Trajectory
from trajectories.rollout_settings import RolloutSettings

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CANCEL_WITHIN_S = 5.0
SLOW_S = 120
SLOW_TEST = "test_slow_step_for_cancel.py"  # a name no other process on the machine has


def slow_task(tmp_path: Path) -> Path:
    """The parse_config example task with a visible test that takes minutes: the oracle's run_tests step hangs."""
    task = tmp_path / "task_slow"
    shutil.copytree(DEMO / "tasks" / "task_0001", task)
    (task / "repo_snapshot" / "tests" / SLOW_TEST).write_text(
        f"import time\n\n\ndef test_takes_minutes():\n    time.sleep({SLOW_S})\n"
    )
    meta = json.loads((task / "metadata.json").read_text())
    meta.update(task_id="task_slow", visible_tests=[f"tests/{SLOW_TEST}"], timeout_seconds=SLOW_S * 2)
    (task / "metadata.json").write_text(json.dumps(meta))
    return task


def sleeping_sandbox_commands() -> int:
    found = subprocess.run(["pgrep", "-f", SLOW_TEST], capture_output=True, text=True)
    return len(found.stdout.split())


def test_cancel_stops_a_running_step_within_5_s_and_the_batch_stays_cancelled(tmp_path: Path) -> None:
    import_task_dirs(slow_task(tmp_path), "slow")
    batch = start_batch(TaskSuite.objects.get(name="slow"), RolloutSettings("scripted"))
    worker = start_worker("rollouts")
    next(worker)
    try:
        trajectory = Trajectory.objects.get(batch=batch)
        deadline = time.monotonic() + 90
        # The oracle reads, edits, then runs the visible tests: the step that takes minutes.
        while not (trajectory.status == "running" and trajectory.step_count >= 2):
            assert time.monotonic() < deadline, f"the rollout never reached its slow step: {trajectory.status}"
            time.sleep(0.05)
            trajectory.refresh_from_db()
        time.sleep(1.0)  # well inside the test run now
        assert sleeping_sandbox_commands() > 0

        asked = time.monotonic()
        assert cancel_batch(batch)
        while trajectory.status == "running":
            assert time.monotonic() - asked < CANCEL_WITHIN_S, "still running 5 s after cancel"
            time.sleep(0.05)
            trajectory.refresh_from_db()
        stopped_after = time.monotonic() - asked
        assert trajectory.status == "cancelled", trajectory.error
        assert stopped_after < CANCEL_WITHIN_S
        assert sleeping_sandbox_commands() == 0  # its process group is gone, not left to run on

        time.sleep(1.5)  # whatever the worker still does with this rollout happens now
        batch.refresh_from_db()
        assert batch.status == "cancelled" and batch.finished_at is not None
        trajectory.refresh_from_db()
        assert trajectory.status == "cancelled"
    finally:
        for _ in worker:
            pass
