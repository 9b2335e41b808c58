"""Two worker "hosts" with separate var/ folders and no shared files complete one batch together.

Everything between them goes through PostgreSQL, Redis and a real S3 server (SeaweedFS): the
tasks are imported here (a third host), their trees uploaded once; each worker fetches the
trees of the tasks it runs, rolls out and scores.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from celery import current_app
from pytest_django import Settings

from rewards.models import Reward
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tasks.storage import hash_tree
from tests.conftest import DEMO, start_worker
from tests.storage.conftest import S3Server
from trajectories.batches import start_batch
from trajectories.models import Trajectory
from trajectories.rollout_settings import RolloutSettings

QUEUES = "rollouts,rewards"
TASKS = ("task_0001", "task_0002", "task_0003", "task_0008", "task_0009", "task_0013")


@pytest.fixture
def two_hosts(settings: Settings, s3_server: S3Server, bucket_url: str, tmp_path: Path) -> Iterator[list[Path]]:
    settings.CRUCIBLE_STORAGE_URL = bucket_url
    settings.CRUCIBLE_S3_ENDPOINT_URL = s3_server.endpoint
    homes = [tmp_path / "host-1", tmp_path / "host-2"]
    with ExitStack() as stack:
        for index, home in enumerate(homes):
            env = {
                "CRUCIBLE_VAR_DIR": str(home),
                "CRUCIBLE_STORAGE_URL": bucket_url,
                "CRUCIBLE_S3_ENDPOINT_URL": s3_server.endpoint,
            }
            worker = contextmanager(start_worker)(QUEUES, env=env, purge=index == 0, name=f"host-{index + 1}@two-hosts")
            stack.enter_context(worker)
        deadline = time.monotonic() + 60
        while len({n for r in current_app.control.ping(timeout=1.0) or [] for n in r if "two-hosts" in n}) < 2:
            assert time.monotonic() < deadline, "the two workers did not answer"
        yield homes


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_two_workers_without_a_shared_disk_finish_and_score_one_batch(two_hosts: list[Path], tmp_path: Path) -> None:
    staging = tmp_path / "import"
    staging.mkdir()
    for name in TASKS:
        shutil.copytree(DEMO / "tasks" / name, staging / name)
    import_task_dirs(staging, "two-hosts")
    batch = start_batch(TaskSuite.objects.get(name="two-hosts"), RolloutSettings("scripted", max_steps=30))
    total = len(TASKS)

    deadline = time.monotonic() + 240
    while Trajectory.objects.filter(batch=batch, scored_at__isnull=False).count() < total:
        failed = list(Trajectory.objects.filter(batch=batch, status="failed").values_list("task_ref", "error"))
        assert not failed, failed
        assert time.monotonic() < deadline, "the batch did not finish on two hosts"
        time.sleep(0.5)

    trajectories = Trajectory.objects.filter(batch=batch)
    assert trajectories.count() == total and all(t.success for t in trajectories)
    assert Reward.objects.filter(trajectory__batch=batch).count() == total  # each scored once
    fetched = [sorted((home / "store" / "trees").glob("[0-9a-f]*")) for home in two_hosts]
    assert all(fetched), "each host ran part of the batch from trees it fetched itself"
    for trees in fetched:
        for tree in trees:
            assert hash_tree(tree)[0].removeprefix("sha256:") == tree.name
