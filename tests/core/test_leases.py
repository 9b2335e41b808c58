"""core.states' leases: a row is taken only when its beats stopped, and an attempt that was
superseded writes nothing, whatever it tries."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from core import states
from tests.factories import TrajectoryFactory
from trajectories.models import Step, Trajectory

pytestmark = pytest.mark.django_db(transaction=True)

STALE = 30.0


def queued() -> Trajectory:
    trajectory: Trajectory = TrajectoryFactory.create(status="queued", attempt=0, heartbeat_at=None)
    return trajectory


def age(trajectory: Trajectory, seconds: float) -> None:
    """The row's last beat, `seconds` ago: its worker stopped then."""
    Trajectory.objects.filter(pk=trajectory.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_a_beating_row_is_never_claimed_and_one_whose_beats_stopped_is_claimed_once() -> None:
    row = queued()
    first = states.claim(Trajectory, row.pk, stale_after=STALE)
    assert first is not None and first.attempt == 1
    assert states.claim(Trajectory, row.pk, stale_after=STALE) is None  # it beats: nobody takes it
    age(row, STALE - 1)
    assert states.claim(Trajectory, row.pk, stale_after=STALE) is None
    age(row, STALE + 1)
    won = []
    barrier = threading.Barrier(4)

    def race() -> None:
        barrier.wait()
        won.append(states.claim(Trajectory, row.pk, stale_after=STALE))
        connection.close()

    threads = [threading.Thread(target=race) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    taken = [lease for lease in won if lease is not None]
    assert len(taken) == 1 and taken[0].attempt == 2  # of four claimants at once, one wins


def test_a_superseded_attempt_writes_nothing_and_its_work_never_runs() -> None:
    row = queued()
    old = states.claim(Trajectory, row.pk, stale_after=STALE)
    assert old is not None
    age(row, STALE + 1)
    new = states.claim(Trajectory, row.pk, stale_after=STALE)
    assert new is not None
    ran: list[str] = []
    with pytest.raises(states.Superseded):
        states.write(old, lambda: ran.append("step"), step_count=99)
    assert ran == [] and Trajectory.objects.get(pk=row.pk).step_count != 99
    assert not states.beat(old)
    assert not states.end(old, states.FINISHED)
    assert Trajectory.objects.get(pk=row.pk).status == "running"
    assert states.end(new, states.FINISHED, patch="diff")  # the holder's end lands
    assert Trajectory.objects.values_list("status", "patch").get(pk=row.pk) == ("finished", "diff")


def test_a_fenced_write_that_fails_half_way_leaves_nothing() -> None:
    row = queued()
    lease = states.claim(Trajectory, row.pk, stale_after=STALE)
    assert lease is not None

    def half() -> None:
        Step.objects.create(trajectory_id=row.pk, step=1, action_type="submit")
        raise RuntimeError("the step's second write failed")

    with pytest.raises(RuntimeError):
        states.write(lease, half, step_count=1)
    assert Trajectory.objects.get(pk=row.pk).step_count == 0 and not Step.objects.exists()


def test_take_back_moves_only_rows_whose_beats_stopped() -> None:
    alive, dead, done = queued(), queued(), queued()
    for row in (alive, dead, done):
        states.claim(Trajectory, row.pk, stale_after=STALE)
    age(dead, STALE + 5)
    Trajectory.objects.filter(pk=done.pk).update(status="finished", heartbeat_at=timezone.now() - timedelta(hours=1))
    moved = states.take_back(Trajectory.objects.all(), STALE)
    assert moved == [dead.pk]
    assert dict(Trajectory.objects.values_list("pk", "status")) == {
        alive.pk: "running",
        dead.pk: "queued",
        done.pk: "finished",
    }
    assert states.take_back(Trajectory.objects.all(), STALE) == []  # a second sweep finds nothing


def test_a_heartbeat_beats_on_the_wall_clock_and_says_when_its_row_was_taken() -> None:
    row = queued()
    lease = states.claim(Trajectory, row.pk, stale_after=STALE)
    assert lease is not None
    age(row, 1000)
    lost: list[bool] = []
    with states.Heartbeat(lease, 0.2, on_lost=lambda: lost.append(True)) as heartbeat:
        deadline = time.monotonic() + 10
        while (Trajectory.objects.get(pk=row.pk).heartbeat_at or timezone.now()) < timezone.now() - timedelta(
            seconds=5
        ):
            assert time.monotonic() < deadline, "no beat"
            time.sleep(0.05)
        # Another worker takes the row over (say this process was stopped): the beat notices.
        Trajectory.objects.filter(pk=row.pk).update(attempt=lease.attempt + 1)
        assert heartbeat.lost.wait(10)
        with pytest.raises(states.Superseded):
            heartbeat.check()
    assert lost == [True]


def test_sqlite_locks_are_retried_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "vendor", "sqlite")
    monkeypatch.setattr(states, "LOCKED_BACKOFF_S", 0.001)
    calls: list[int] = []

    def locked_twice() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("database is locked")
        return "done"

    assert states.retry_locked(locked_twice) == "done" and len(calls) == 3

    def always_locked() -> Any:
        calls.append(1)
        raise OperationalError("database is locked")

    calls.clear()
    with pytest.raises(OperationalError, match="locked"):
        states.retry_locked(always_locked)
    assert len(calls) == states.LOCKED_RETRIES + 1

    def other_error() -> Any:
        raise OperationalError("no such table: x")

    with pytest.raises(OperationalError, match="no such table"):
        states.retry_locked(other_error)
