"""Real Celery workers that a test may kill, with their logs kept for the failure message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import REPO, purge_queues


class Worker:
    """One `celery worker` process on the test database and the tests' Redis database."""

    def __init__(self, queues: str, log: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.log = log
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "webapp.settings_test",
            "CRUCIBLE_DB_NAME": str(connection.settings_dict["NAME"]),
            **(env or {}),
        }
        argv = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", queues]
        argv += ["--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO", *extra]
        with log.open("ab") as fh:
            # Its own session: a kill takes the worker and every process it started, as a crash of the host would.
            self.proc = subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
            )

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def kill(self) -> None:
        """SIGKILL to the worker's whole process group: no goodbye, nothing acknowledged or cleaned up."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=20)

    def pause(self) -> None:
        """SIGSTOP to the whole group, as a machine too loaded to schedule it (or a laptop's lid) would."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """At the end of a test: nothing is in flight that a warm shutdown would save, so no waiting for one."""
        self.kill()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Start workers on demand (the first one purges its queues); every one is stopped at the end."""
    started: list[Worker] = []

    def start(queues: str, *extra: str, env: dict[str, str] | None = None) -> Worker:
        if not started:
            purge_queues(queues)
        worker = Worker(queues, tmp_path / f"worker-{len(started)}.log", *extra, env=env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def wait_for(check: Callable[[], bool], seconds: float, what: str, worker: Worker | None = None) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if worker is not None:
            assert worker.proc.poll() is None, f"the worker died waiting for {what}:\n{worker.tail()}"
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds:g} s for {what}" + (f":\n{worker.tail()}" if worker else ""))
        time.sleep(0.05)
