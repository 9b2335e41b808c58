"""A real Celery worker process, on the real Redis broker and the test database."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest
from django.conf import settings

from tests.conftest import DEMO, start_worker
from trajectories.jobs import import_trajectories_job
from trajectories.models import Trajectory

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker() -> Iterator[subprocess.Popen[bytes]]:
    yield from start_worker("default")


def test_a_worker_runs_a_background_import(worker: subprocess.Popen[bytes]) -> None:
    # The tests' own Redis database, never the one a running `make run` uses.
    assert settings.CELERY_BROKER_URL == os.environ["CRUCIBLE_TEST_REDIS"]
    started = time.monotonic()
    result = import_trajectories_job.delay(str(DEMO / "trajectories.jsonl"), allow_unknown_tasks=True)
    counts = result.get(timeout=90)
    assert worker.poll() is None, worker.stderr.read().decode() if worker.stderr else ""
    assert counts["created"] == Trajectory.objects.count() > 0
    assert counts["steps"] > 0
    # Running the job again (a retry after a crash) adds nothing.
    again = import_trajectories_job.delay(str(DEMO / "trajectories.jsonl"), allow_unknown_tasks=True)
    assert again.get(timeout=60)["created"] == 0
    assert time.monotonic() - started < 90
