from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.factories import PASSWORD, UserFactory
from tests.long_poles import poles_first
from trajectories.model_server import ModelServer
from trajectories.services import import_trajectories

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "demo"


@pytest.fixture
def admin_user(db: None) -> User:
    return UserFactory.create(username="alice-admin", role="admin")


@pytest.fixture
def researcher(db: None) -> User:
    return UserFactory.create(username="rita-researcher", role="researcher")


@pytest.fixture
def reviewer(db: None) -> User:
    return UserFactory.create(username="rob-reviewer", role="reviewer")


@pytest.fixture
def outsider(db: None) -> User:
    return UserFactory.create(username="oscar-outsider")


def client_for(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.fixture
def reviewer_client(reviewer: User) -> Client:
    return client_for(reviewer)


@pytest.fixture
def demo_suite(db: None) -> TaskSuite:
    import_task_dirs(DEMO / "tasks", "demo", "train")
    import_trajectories(DEMO / "trajectories.jsonl")
    return TaskSuite.objects.get(name="demo")


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    """A private copy of the parse_config example task (task_0001), free to be broken by a test."""
    dest = tmp_path / "task_0001"
    shutil.copytree(DEMO / "tasks" / "task_0001", dest)
    return dest


def purge_queues(queues: str) -> None:
    """Drop jobs an earlier test left in the tests' broker for these queues.

    Trajectory ids are uuid5 of (batch, task, sample), so a job left behind by an earlier
    test can name the same id as a fresh database's first batch and run against it.
    """
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        for queue in queues.split(","):
            # Celery's Redis transport keeps a queue in a list named after it, with one
            # list per priority level, all under the instance's prefix.
            name = f"{settings.REDIS_KEY_PREFIX}{queue}"
            keys = [name, *client.scan_iter(match=f"{name}\x06\x16*")]
            client.delete(*keys)
    finally:
        client.close()


def start_worker(
    queues: str, env: dict[str, str] | None = None, purge: bool = True, name: str = ""
) -> Iterator[subprocess.Popen[bytes]]:
    """A real Celery worker process on the test database and the tests' Redis database.

    `env` adds to the worker's environment: its own CRUCIBLE_VAR_DIR makes it a separate host.
    """
    if purge:
        purge_queues(queues)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings_test",
        "CRUCIBLE_DB_NAME": str(connection.settings_dict["NAME"]),
        **(env or {}),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "webapp",
            "worker",
            "-Q",
            queues,
            "--pool",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "WARNING",
            *(["-n", name] if name else []),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def rewards_worker() -> Iterator[subprocess.Popen[bytes]]:
    """A real worker on the `rewards` queue, its queue purged first (start_worker)."""
    yield from start_worker("rewards")


@pytest.fixture(scope="session")
def model_dir() -> str:
    """The bundled model, converted by `make setup` (and here, once, if it is missing)."""
    from django.conf import settings

    from scripts.fetch_model import fetch

    fetch(Path(settings.CRUCIBLE_DEFAULT_MODEL))
    return str(settings.CRUCIBLE_DEFAULT_MODEL)


@pytest.fixture(scope="session")
def model_server(model_dir: str) -> Iterator[ModelServer]:
    """The bundled model behind `transformers serve`, one per test process for every test that needs
    it (its start costs about 15 CPU-s; tests/long_poles.py keeps those tests on one worker)."""
    from trajectories.model_server import serve_model

    with serve_model(model_dir) as server:
        yield server


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under xdist each worker gets a contiguous slice: start each with its share of the long poles.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1:
        items[:] = poles_first(items, workers)
