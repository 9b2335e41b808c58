"""Two Crucible deployments on one Redis database (separate databases and var dirs), each running a
batch at the same time: each worker runs only its own instance's jobs, and each instance's live
groups carry only its own events, even when both batches have the same number (the same group name,
the same trajectory ids: uuid5 of batch, task and sample).

The second instance is a plain `webapp.settings` deployment on SQLite with no CRUCIBLE_INSTANCE: its
name is derived from its database (core.env.instance_name), as two checkouts' would be.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from rewards.jobs import score_trajectory_job
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, REPO
from tests.reliability.conftest import Worker, wait_for
from trajectories.batches import enqueue_missing, start_batch
from trajectories.events import batch_live_group
from trajectories.models import RolloutBatch
from trajectories.rollout_settings import RolloutSettings

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

SAMPLES = 3


def other_instance(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRUCIBLE_", "DJANGO_", "DATABASE_URL"))}
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "DATABASE_URL": f"sqlite:///{tmp / 'other.sqlite3'}",
        "CRUCIBLE_VAR_DIR": str(tmp / "var"),
        "REDIS_URL": settings.REDIS_URL,  # the same Redis database as this instance
        "HF_HUB_OFFLINE": "1",
    }


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def shell(env: dict[str, str], code: str) -> str:
    return manage(env, "shell", "-v", "0", "-c", code)


def test_two_instances_on_one_redis_run_only_their_own_jobs_and_hear_only_their_own_events(
    workers: Callable[..., Worker], tmp_path: Path
) -> None:
    import_task_dirs(DEMO / "tasks" / "task_0001", "mine")
    mine = start_batch(TaskSuite.objects.get(name="mine"), RolloutSettings("scripted", samples=SAMPLES), enqueue=False)

    other = other_instance(tmp_path)
    (tmp_path / "var").mkdir()
    manage(other, "migrate", "--no-input", "-v0")
    # Another task: their trajectory ids differ from mine, so an event of theirs would show.
    manage(other, "import_tasks", str(DEMO / "tasks" / "task_0002"), "--suite", "theirs")
    theirs_name = manage(
        other, "shell", "-v", "0", "-c", "from django.conf import settings; print(settings.CRUCIBLE_INSTANCE)"
    )
    assert theirs_name.strip() not in ("", settings.CRUCIBLE_INSTANCE)

    # Both instances' live groups for batch N, heard through this instance's channel layer.
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(batch_live_group(mine.pk), channel)

    my_worker = workers("rollouts,rewards", "--pool", "solo")
    log = tmp_path / "their-worker.log"
    with log.open("wb") as out:
        their_worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", "rollouts,rewards", "--pool", "solo"]
            + ["--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
            cwd=REPO,
            env=other,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # Their batch gets the same number as mine: the same group name, the same trajectory ids.
        sequence = f"UPDATE sqlite_sequence SET seq = {int(mine.pk) - 1} WHERE name = 'trajectories_rolloutbatch'"  # noqa: S608
        launch = (
            "from django.db import connection; from tasks.models import TaskSuite; "
            "from trajectories.batches import start_batch; from trajectories.rollout_settings import RolloutSettings; "
            f'connection.cursor().execute("{sequence}"); '
            f"rollout = RolloutSettings('scripted', samples={SAMPLES}); "
            "print(start_batch(TaskSuite.objects.get(name='theirs'), rollout).pk)"
        )
        theirs_pk = int(shell(other, launch).strip().splitlines()[-1])
        assert theirs_pk == mine.pk
        enqueue_missing(mine)

        def mine_ended() -> bool:
            mine.refresh_from_db()
            return mine.status in ("succeeded", "failed")

        wait_for(mine_ended, 180, "my batch to end", my_worker)
        counts = "from trajectories.models import RolloutBatch as B; b = B.objects.get(); print(b.status)"
        wait_for(
            lambda: shell(other, counts).strip() in ("succeeded", "failed"),
            180,
            "theirs to end",
        )
    finally:
        their_worker.terminate()
        their_worker.wait(timeout=30)
    events = drain(layer, channel)

    assert mine.status == RolloutBatch.Status.SUCCEEDED, my_worker.tail()
    assert set(mine.trajectories.values_list("attempt", flat=True)) == {1}
    their_state = shell(
        other,
        "from trajectories.models import Trajectory as T; "
        "print(sorted(set(T.objects.values_list('status', 'attempt', 'success'))))",
    )
    assert their_state.strip() == "[('finished', 1, True)]", their_state
    for text in (my_worker.tail(100000), log.read_text()):
        assert "refusing job" not in text and "DoesNotExist" not in text and "Traceback" not in text, text[-3000:]
        assert text.count("submitted after") == SAMPLES, text[-3000:]  # its own rollouts, each once
    my_ids = {str(t) for t in mine.trajectories.values_list("trajectory_id", flat=True)}
    heard = [e for e in events if "trajectory_id" in e]
    assert heard and {e["trajectory_id"] for e in heard} <= my_ids
    # Their batch ran the same number of rollouts: its every event would have reached us by name.
    assert len([e for e in heard if e.get("kind") == "trajectory"]) == SAMPLES


def drain(layer: Any, channel: str) -> list[dict[str, Any]]:
    async def take() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        while True:
            try:
                message = await asyncio.wait_for(layer.receive(channel), timeout=1.0)
            except TimeoutError:
                return got
            got.append(message["event"])

    return async_to_sync(take)()


def test_a_job_stamped_by_another_instance_is_refused_loudly_and_not_run(
    workers: Callable[..., Worker], settings: Any
) -> None:
    worker = workers("rewards", "--pool", "solo")
    # Published under another instance's name into this instance's queue: only a misconfiguration
    # (two deployments given one name) gets it here, and running it would act on the wrong rows.
    settings.CRUCIBLE_INSTANCE = "someone-else"
    score_trajectory_job.delay("00000000-0000-0000-0000-000000000000")
    wait_for(lambda: "refusing job" in worker.tail(), 90, "the worker to refuse the job", worker)
    log = worker.tail()
    assert "published by Crucible instance 'someone-else'" in log
    assert "scoring of 00000000" not in log  # it never ran
