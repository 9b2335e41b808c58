"""A process stopped in the middle of a step (SIGSTOP, as an overloaded machine or a closed laptop lid
does) for twice the stale window, then woken: the rollout is taken over once, and the stopped attempt
writes nothing when it wakes. A step three times longer than the window, on a live worker, is never
taken over: liveness comes from the attempt's heartbeat, not from how long a step takes.

The model is a real OpenAI-compatible server on loopback that takes its time over each answer
(tests.reliability.slow_model); its answers are numbered, so the steps in the database say which
attempt they came from.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, REPO
from tests.reliability.conftest import Worker, wait_for
from tests.reliability.slow_model import SlowModel, slow_model
from trajectories.batches import start_batch
from trajectories.models import RolloutBatch, Step, Trajectory
from trajectories.rollout_settings import RolloutSettings

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

STALE_S = 3
FAST = {"CRUCIBLE_ROLLOUT_STALE_S": str(STALE_S), "CRUCIBLE_SWEEP_S": "1", "CRUCIBLE_LOST_AFTER_S": "2"}


def suite(name: str) -> TaskSuite:
    import_task_dirs(DEMO / "tasks" / "task_0001", name)
    return TaskSuite.objects.get(name=name)


def one_attempt_each(batch: RolloutBatch) -> None:
    """Every trajectory ran to one clean record: steps 1..n of the attempt that holds it."""
    for trajectory in batch.trajectories.all():
        numbers = list(Step.objects.filter(trajectory=trajectory).order_by("step").values_list("step", flat=True))
        assert trajectory.status == "finished", trajectory.error
        assert numbers == list(range(1, trajectory.step_count + 1)) and numbers, numbers
        assert trajectory.termination == "submitted"


def stopped_marker_absent(model: SlowModel, number: int) -> None:
    """The answer the stopped attempt was waiting for never became a step."""
    assert not Step.objects.filter(thought=model.marker(number)).exists()


def frozen(trajectory: Trajectory) -> tuple[object, ...]:
    row = Trajectory.objects.get(pk=trajectory.pk)
    steps = tuple(Step.objects.filter(trajectory=row).order_by("step").values_list("id", "thought"))
    return row.status, row.attempt, row.heartbeat_at, row.step_count, row.patch, steps


def test_a_worker_stopped_mid_step_is_taken_over_once_and_writes_nothing_when_it_wakes(
    workers: Callable[..., Worker],
) -> None:
    with slow_model(delay=1.5) as model:
        first = workers("rollouts", "--pool", "solo", env=FAST)
        batch = start_batch(suite("stopped"), RolloutSettings("openai", "slow", base_url=model.url, samples=1))
        trajectory = batch.trajectories.get()
        wait_for(lambda: Trajectory.objects.filter(pk=trajectory.pk, status="running").exists(), 90, "a claim", first)
        waiting_for = model.wait_in_flight(60)  # the first worker is inside a step: its model call
        first.pause()
        second = workers("rollouts", "--pool", "solo", env=FAST)
        try:
            # Twice the stale window: the second worker's sweep sees the beats stopped and takes it over.
            wait_for(lambda: Trajectory.objects.get(pk=trajectory.pk).attempt == 2, 4 * STALE_S + 30, "a take-over")
            time.sleep(max(0.0, 2 * STALE_S - 1))
        finally:
            first.resume()

        def ended() -> bool:
            batch.refresh_from_db()
            return batch.status in ("succeeded", "failed")

        wait_for(ended, 90, "the batch to end", second)
        wait_for(lambda: "was superseded" in first.tail(20000), 30, "the stopped worker to notice", first)
        before = frozen(trajectory)
        time.sleep(2)  # whatever the woken attempt still had to write would land now
        assert frozen(trajectory) == before
    assert batch.status == RolloutBatch.Status.SUCCEEDED, second.tail()
    one_attempt_each(batch)
    assert Trajectory.objects.get(pk=trajectory.pk).attempt == 2
    stopped_marker_absent(model, waiting_for)
    assert first.tail(20000).count("was superseded") == 1
    assert "IntegrityError" not in first.tail(20000) + second.tail(20000)


def test_the_rollout_command_stopped_mid_step_hands_its_rollout_to_a_worker_and_exits_0(
    workers: Callable[..., Worker], tmp_path: Path
) -> None:
    suite("command-stopped")
    with slow_model(delay=1.5) as model:
        worker = workers("rollouts,rewards", "--pool", "solo", env=FAST)
        env = {
            **os.environ,
            **FAST,
            "DJANGO_SETTINGS_MODULE": "webapp.settings_test",
            "CRUCIBLE_DB_NAME": str(connection.settings_dict["NAME"]),
        }
        log = tmp_path / "rollout.log"
        argv = [sys.executable, "manage.py", "rollout", "--suite", "command-stopped", "--policy", "openai"]
        argv += ["--model", "slow", "--base-url", model.url, "--samples", "2", "--output-dir", str(tmp_path / "out")]
        with log.open("wb") as out:
            command = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: Trajectory.objects.filter(status="running").exists(), 90, "the command's first claim")
            waiting_for = model.wait_in_flight(60)
            command.send_signal(signal.SIGSTOP)
            try:
                running = Trajectory.objects.get(status="running")
                wait_for(lambda: Trajectory.objects.get(pk=running.pk).attempt == 2, 4 * STALE_S + 30, "a take-over")
                time.sleep(max(0.0, 2 * STALE_S - 1))
            finally:
                command.send_signal(signal.SIGCONT)
            assert command.wait(timeout=180) == 0, log.read_text()[-3000:]
        finally:
            if command.poll() is None:
                command.kill()
    text = log.read_text()
    batch = RolloutBatch.objects.get()
    assert batch.status == RolloutBatch.Status.SUCCEEDED, text[-3000:]
    one_attempt_each(batch)
    assert sorted(batch.trajectories.values_list("attempt", flat=True)) == [1, 2]
    assert batch.trajectories.filter(scored_at=None).count() == 0  # the JSONL waited for every score
    stopped_marker_absent(model, waiting_for)
    assert "IntegrityError" not in text + worker.tail(20000)
    assert ": 2 done, 0 left" in text, text[-2000:]


def test_a_step_three_times_the_stale_window_is_never_taken_over(workers: Callable[..., Worker]) -> None:
    stale = 2
    env = {"CRUCIBLE_ROLLOUT_STALE_S": str(stale), "CRUCIBLE_SWEEP_S": "0.5", "CRUCIBLE_LOST_AFTER_S": "1"}
    with slow_model(delay=3 * stale) as model:
        worker = workers("rollouts", "--pool", "solo", env=env)
        # A second worker beside it sweeps too, as in a fleet: neither may take the live rollout.
        other = workers("rollouts", "--pool", "solo", env=env)
        batch = start_batch(suite("slow-steps"), RolloutSettings("openai", "slow", base_url=model.url, samples=1))

        def ended() -> bool:
            batch.refresh_from_db()
            return batch.status in ("succeeded", "failed")

        wait_for(ended, 120, "the slow batch to end", worker)
    assert batch.status == RolloutBatch.Status.SUCCEEDED, worker.tail() + other.tail()
    one_attempt_each(batch)
    trajectory = batch.trajectories.get()
    assert trajectory.attempt == 1 and trajectory.step_count == 2
    assert model.served == 2  # each step asked once: no second attempt asked again
    for log in (worker.tail(20000), other.tail(20000)):
        assert "no heartbeat" not in log and "superseded" not in log
