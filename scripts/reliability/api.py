"""The REST API under a fixed number of requests from concurrent clients with a token.

Each client is an httpx.AsyncClient with its own connection, walking the read endpoints a
pipeline uses (lists and details of suites, tasks, trajectories, batches) round-robin.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from scripts.reliability.stack import Stack, percentile


def read_paths(stack: Stack) -> list[str]:
    from tasks.models import Task
    from trajectories.models import RolloutBatch, Trajectory

    task = Task.objects.order_by("task_id").first()
    trajectory = Trajectory.objects.exclude(step_count=0).order_by("id").first()
    batch = RolloutBatch.objects.order_by("id").first()
    paths = ["/api/v1/suites/", "/api/v1/tasks/", "/api/v1/trajectories/", "/api/v1/batches/"]
    if task is not None:
        paths += [f"/api/v1/suites/{task.suite.name}/", f"/api/v1/tasks/{task.task_id}/"]
    if trajectory is not None:
        paths += [f"/api/v1/trajectories/{trajectory.trajectory_id}/", "/api/v1/trajectories/?status=finished"]
    if batch is not None:
        paths.append(f"/api/v1/batches/{batch.pk}/")
    return paths


async def _client(base: str, token: str, paths: list[str], todo: list[int], out: dict[str, Any]) -> None:
    headers = {"Authorization": f"Token {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        while todo:
            n = todo.pop()
            path = paths[n % len(paths)]
            started = time.perf_counter()
            status: int | str
            try:
                response = await client.get(path)
                status = response.status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            out["latencies_ms"].append((time.perf_counter() - started) * 1000)
            out["statuses"][str(status)] = out["statuses"].get(str(status), 0) + 1


def answering(stack: Stack, paths: list[str]) -> tuple[list[str], list[str]]:
    """The paths that answer 200 before the run (an endpoint this version lacks is left out, and said)."""
    headers = {"Authorization": f"Token {stack.token}"}
    with httpx.Client(base_url=stack.base_url, headers=headers, timeout=60) as client:
        ok = [path for path in paths if client.get(path).status_code == 200]
    return ok, [path for path in paths if path not in ok]


def run(stack: Stack, requests: int, clients: int) -> dict[str, Any]:
    paths, skipped = answering(stack, read_paths(stack))
    if not paths:
        raise SystemExit("no read endpoint answered 200; is the server up?")
    todo = list(range(requests))
    out: dict[str, Any] = {"latencies_ms": [], "statuses": {}}

    async def main() -> None:
        await asyncio.gather(*(_client(stack.base_url, stack.token, paths, todo, out) for _ in range(clients)))

    started = time.perf_counter()
    asyncio.run(main())
    wall = time.perf_counter() - started
    errors = sum(n for status, n in out["statuses"].items() if not status.startswith("2"))
    return {
        "requests": requests,
        "clients": clients,
        "endpoints": paths,
        "endpoints_not_answering": skipped,
        "statuses": out["statuses"],
        "errors": errors,
        "p50_ms": percentile(out["latencies_ms"], 0.5),
        "p95_ms": percentile(out["latencies_ms"], 0.95),
        "max_ms": percentile(out["latencies_ms"], 1.0),
        "requests_per_s": round(requests / wall, 1),
        "wall_s": round(wall, 1),
        "server": "daphne, one process (as `make run` starts it)",
    }
