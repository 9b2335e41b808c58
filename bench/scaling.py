"""Scaling (issue 17): one scripted batch, rolled out and scored by 1, 2 and 4 worker processes.

Reports trajectories/hour for each, the speed-up over one process, and what each trajectory
costs in database rows and bytes and in object storage once archived. docs/scaling.md
projects a fleet from these figures.

Runs on a private PostgreSQL database (BENCH_DATABASE_URL, dropped and made afresh), Redis
database 14 and a temporary var/; each worker is a real `celery worker` process with its own
CRUCIBLE_VAR_DIR, as separate hosts would be, and one process each (`--pool solo`), so "N
workers" means N processes competing for this machine's cores.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.checks import check
from bench.workers import cpu_ticks, fresh_database, start_workers, stop

REPO = Path(__file__).resolve().parent.parent
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crucible_bench_scaling")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
SAMPLES = int(os.environ.get("BENCH_SCALING_SAMPLES", "2"))
WORKERS = tuple(int(n) for n in os.environ.get("BENCH_SCALING_WORKERS", "1,2,4").split(","))
QUEUES = "rollouts,rewards"


def _setup(tmp: Path) -> None:
    os.environ.update(
        {
            "DATABASE_URL": DATABASE_URL,
            "CRUCIBLE_VAR_DIR": str(tmp / "var-web"),
            "REDIS_URL": REDIS_URL,
            "CRUCIBLE_INSTANCE": "crucible-bench-scaling",
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
            "CRUCIBLE_STORAGE_URL": str(tmp / "objects"),
        }
    )
    fresh_database(DATABASE_URL)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _purge() -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.delete(*QUEUES.split(","))
    client.close()


def _one_run(workers: int, tmp: Path) -> dict[str, Any]:
    from tasks.models import TaskSuite
    from trajectories.batches import start_batch
    from trajectories.models import Trajectory
    from trajectories.rollout_settings import RolloutSettings

    _purge()
    procs = start_workers(workers, tmp, QUEUES, f"scaling-{workers}")
    try:
        started = time.monotonic()
        busy_before, total_before = cpu_ticks()
        batch = start_batch(
            TaskSuite.objects.get(name="scaling"), RolloutSettings("scripted", samples=SAMPLES, max_steps=30)
        )
        total = batch.trajectories.count()
        deadline = started + 1800
        while time.monotonic() < deadline:
            done = Trajectory.objects.filter(batch=batch, scored_at__isnull=False).count()
            failed = Trajectory.objects.filter(batch=batch, status="failed").count()
            if done + failed >= total:
                break
            time.sleep(0.5)
        wall = time.monotonic() - started
        busy_after, total_after = cpu_ticks()
    finally:
        stop(procs)
    cores = os.cpu_count() or 1
    # How many of the machine's cores the batch kept busy on average: with one worker already
    # near `cores`, more workers have nothing left to run on.
    busy_cores = cores * (busy_after - busy_before) / max(1, total_after - total_before)
    return {
        "workers": workers,
        "trajectories": total,
        "scored": done,
        "failed": failed,
        "wall_s": round(wall, 1),
        "trajectories_per_hour": round(done / wall * 3600, 1) if wall else 0.0,
        "busy_cores": round(busy_cores, 2),
        "cpu_s_per_trajectory": round(busy_cores * wall / done, 2) if done else None,
        "batch": batch.pk,
    }


def _costs(batch_ids: list[int]) -> dict[str, Any]:
    from django.db import connection

    from trajectories.archive import archive_batch
    from trajectories.models import RolloutBatch, Step, Trajectory

    trajectories = Trajectory.objects.filter(batch_id__in=batch_ids).count()
    steps = Step.objects.filter(trajectory__batch_id__in=batch_ids).count()
    with connection.cursor() as cursor:
        sizes = {}
        for table in ("trajectories_trajectory", "trajectories_step", "rewards_reward"):
            cursor.execute("SELECT pg_total_relation_size(%s)", [table])
            sizes[table] = int(cursor.fetchone()[0])
    rewards = sum(1 for _ in Trajectory.objects.filter(batch_id__in=batch_ids, rewards__isnull=False))
    archived = [archive_batch(RolloutBatch.objects.get(pk=pk)) for pk in batch_ids]
    archive_bytes = sum(a.bytes for a in archived)
    return {
        "trajectories": trajectories,
        "rows_per_trajectory": round((trajectories + steps + rewards) / trajectories, 2) if trajectories else 0,
        "steps_per_trajectory": round(steps / trajectories, 2) if trajectories else 0,
        "db_bytes_per_trajectory": round(sum(sizes.values()) / trajectories) if trajectories else 0,
        "db_bytes_by_table": sizes,
        "archive_bytes_per_trajectory": round(archive_bytes / trajectories) if trajectories else 0,
    }


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-scaling-") as tmp_name:
        tmp = Path(tmp_name)
        _setup(tmp)
        from tasks.services import import_task_dirs

        import_task_dirs(REPO / "demo" / "tasks", "scaling", "train")
        runs = [_one_run(n, tmp) for n in WORKERS]
        costs = _costs([r["batch"] for r in runs])
    one = next((r for r in runs if r["workers"] == 1), runs[0])
    speedups = {
        str(r["workers"]): round(r["trajectories_per_hour"] / one["trajectories_per_hour"], 2)
        for r in runs
        if one["trajectories_per_hour"]
    }
    return {
        "cores": os.cpu_count(),
        "samples_per_task": SAMPLES,
        "runs": runs,
        "speedup_over_one": speedups,
        "target_two_workers": 1.7,
        "checks": [
            check(
                "scripted batch, 2 workers vs 1",
                speedups.get("2", 0.0),
                1.7,
                better="higher",
                unit="x",
                floor="the same batch on one worker process, same run",
            )
        ],
        "met": speedups.get("2", 0.0) >= 1.7,
        # The most any number of workers could gain here: the cores there are over the cores one worker's batch
        # already keeps busy (itself, its sandboxes, PostgreSQL, Redis).
        "ceiling_from_cpu": round((os.cpu_count() or 1) / one["busy_cores"], 2) if one["busy_cores"] else None,
        "median_trajectories_per_hour": statistics.median(r["trajectories_per_hour"] for r in runs),
        "costs": costs,
    }
