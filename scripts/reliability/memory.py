"""A long scripted batch on one worker, its memory sampled every few seconds: does it stay flat?

The worker is prefork with one pool process, as `make run` starts it (without a task limit per
child, so a leak would show). RSS is the worker's main process plus its pool processes, not the
short-lived sandboxes. Growth is the end RSS less the RSS once the first trajectory was done
(start-up is not growth); the slope is a least-squares fit of RSS against trajectories done.
"""

from __future__ import annotations

import time
from typing import Any

import psutil

from scripts.reliability.stack import Stack

SAMPLE_S = 3.0


def tree_rss(pid: int) -> int:
    main = psutil.Process(pid)
    total = main.memory_info().rss
    for child in main.children():
        try:
            if child.name().startswith(("python", "celery")):
                total += child.memory_info().rss
        except psutil.Error:
            continue
    return total


def slope(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 0.0 if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def run(stack: Stack, trajectories: int, concurrency: int) -> dict[str, Any]:
    from trajectories.models import RolloutBatch, Trajectory

    worker = stack.worker("rollouts", concurrency, log="memory-worker.log")
    tasks = _task_count()
    samples = max(1, -(-trajectories // tasks))
    batch = stack.scripted_batch(samples, enqueue=True)
    total = batch.trajectories.count()
    started = time.monotonic()
    points: list[tuple[float, int, float]] = []  # (seconds, trajectories done, RSS MiB)
    while True:
        done = Trajectory.objects.filter(batch=batch).exclude(status__in=["queued", "running"]).count()
        if worker.poll() is not None:
            raise SystemExit(f"the worker died (exit {worker.returncode}); see {stack.tmp}/memory-worker.log")
        points.append((time.monotonic() - started, done, tree_rss(worker.pid) / 2**20))
        if RolloutBatch.objects.get(pk=batch.pk).status in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(SAMPLE_S)
    wall = time.monotonic() - started
    # From the first trajectory done: the start-up (imports, first sandbox) is not growth.
    steady = [p for p in points if p[1] > 0] or points
    rss = [p[2] for p in steady]
    per_1000 = slope([p[1] for p in steady], rss) * 1000
    finished = Trajectory.objects.filter(batch=batch, status="finished").count()
    return {
        "trajectories": total,
        "finished": finished,
        "worker_concurrency": concurrency,
        "samples": len(points),
        "sample_every_s": SAMPLE_S,
        "rss_start_mib": round(rss[0], 1),
        "rss_peak_mib": round(max(rss), 1),
        "rss_end_mib": round(rss[-1], 1),
        "growth_mib": round(rss[-1] - rss[0], 1),
        "slope_mib_per_1000": round(per_1000, 2),
        "trajectories_per_s": round(finished / wall, 2) if wall else None,
        "wall_s": round(wall, 1),
        "series": [[round(t, 1), d, round(m, 1)] for t, d, m in points[:: max(1, len(points) // 60)]],
    }


def _task_count() -> int:
    from tasks.models import TaskSuite

    return TaskSuite.objects.get(name="load").tasks.count()
