"""Rollout infrastructure: a scripted batch's wall time against the time spent in sandboxes,
and the latency from a recorded step to a WebSocket client on loopback.

Targets: wall / summed sandbox time <= 1.5x; step -> client p95 <= 100 ms.
Runs on a private SQLite database and var/ so it never touches a real one.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.checks import check

REPO = Path(__file__).resolve().parent.parent
STEPS = int(os.environ.get("BENCH_WS_STEPS", "200"))


def _setup(tmp: Path) -> None:
    os.environ.update(
        {
            "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
            "CRUCIBLE_VAR_DIR": str(tmp / "var"),
            "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
            "CRUCIBLE_INSTANCE": "crucible-bench",
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _overhead() -> dict[str, Any]:
    from tasks.models import TaskSuite
    from tasks.services import import_task_dirs
    from trajectories.batches import start_batch
    from trajectories.rollout_settings import RolloutSettings
    from trajectories.runner import run_trajectory

    import_task_dirs(REPO / "demo" / "tasks", "bench")
    batch = start_batch(TaskSuite.objects.get(name="bench"), RolloutSettings("scripted"), enqueue=False)
    started = time.perf_counter()
    for trajectory in batch.trajectories.order_by("id"):
        run_trajectory(trajectory.pk)
    wall = time.perf_counter() - started
    sandbox = sum(t.sandbox.get("sandbox_ms", 0) for t in batch.trajectories.all()) / 1000
    return {
        "trajectories": batch.trajectories.count(),
        "wall_s": round(wall, 2),
        "sandbox_s": round(sandbox, 2),
        "ratio": round(wall / sandbox, 2),
        "target_ratio": 1.5,
    }


def _latency(tmp: Path) -> dict[str, Any]:
    import websockets
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from django.utils import timezone

    from core.states import Lease
    from trajectories.models import Trajectory
    from trajectories.recorder import DBRecorder
    from trajectories.schema import AgentStep

    user = User.objects.create_user("bench", password="bench-pass-123")
    user.groups.add(Group.objects.get(name="reviewer"))
    client = Client()
    client.login(username="bench", password="bench-pass-123")
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    trajectory = Trajectory.objects.create(
        trajectory_id=uuid.uuid4(), task_ref="bench", created_at=timezone.now(), status="running", attempt=1
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.asgi:application"],
        cwd=REPO,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sent: dict[int, float] = {}
    received: dict[int, float] = {}
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)

        async def listen(ready: threading.Event) -> None:
            async with websockets.connect(
                f"ws://127.0.0.1:{port}/ws/",
                additional_headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"},
            ) as ws:
                await ws.send(f'{{"action": "subscribe", "group": "trajectory-{trajectory.trajectory_id}"}}')
                await ws.recv()
                ready.set()
                while len(received) < STEPS:
                    import json

                    message = json.loads(await asyncio.wait_for(ws.recv(), 30))
                    now = time.perf_counter()
                    for step in message.get("event", {}).get("steps", []):
                        received[step["step"]] = now

        ready = threading.Event()
        thread = threading.Thread(target=lambda: asyncio.run(listen(ready)), daemon=True)
        thread.start()
        ready.wait(30)
        recorder = DBRecorder(trajectory, Lease(Trajectory, trajectory.pk, 1))
        for n in range(1, STEPS + 1):
            record: AgentStep = {
                "step": n,
                "action_type": "run_command",
                "action_input": {"command": "true"},
                "observation": "ok",
                "observation_truncated": False,
                "thought": "",
                "exit_code": 0,
                "duration_ms": 1.0,
                "timestamp": None,
                "policy_ms": 0.0,
            }
            recorder.last_flush = 0.0  # one message per step: measure the path, not the batching
            sent[n] = time.perf_counter()
            recorder.step(record)
            time.sleep(0.01)
        thread.join(30)
    finally:
        server.terminate()
        server.wait(timeout=20)
    latencies = sorted((received[n] - sent[n]) * 1000 for n in sent if n in received)
    return {
        "steps": STEPS,
        "received": len(latencies),
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "target_p95_ms": 100,
    }


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-rollouts-") as name:
        tmp = Path(name)
        _setup(tmp)
        overhead = _overhead()
        latency = _latency(tmp)
    return {
        "scripted_batch": overhead,
        "step_to_websocket": latency,
        "checks": [
            check(
                "scripted batch wall / sandbox time",
                overhead["ratio"],
                overhead["target_ratio"],
                better="lower",
                unit="x",
                floor="the same commands' sandbox time, same run",
            ),
            check(
                "live step -> WebSocket client, p95",
                latency["p95_ms"],
                latency["target_p95_ms"],
                better="lower",
                unit=" ms",
            ),
        ],
        "summary": {
            "overhead_ratio": overhead["ratio"],
            "ws_p50_ms": latency["p50_ms"],
            "ws_p95_ms": latency["p95_ms"],
        },
    }
