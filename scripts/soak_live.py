"""Soak the live layer: a batch running for minutes, viewers connected; count Redis timeouts and reconnects.

`make reliability` runs it (10 minutes; `SOAK_ARGS="--minutes 2"` for less). Everything is
private to the run: its own redis-server on a free port, an SQLite database in a temporary var
directory, a daphne server and one Celery worker; nothing else on the machine is touched.

Viewers are WebSocket clients that behave like the batch page: they send no pings of their
own (a browser does not) and half of them watch a group nobody publishes to, the idle page
that redis-py's 5 s socket timeout used to drop. A viewer whose socket closes reconnects and
counts it. Figures go to var/reliability/soak_live.json; the exit status is 1 when a viewer
lost its connection or a process logged a Redis timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_MARKERS = ("TimeoutError", "Timeout reading from")
IDLE_GROUP = "batch-999999999"  # a group nobody publishes to


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nothing answered on port {port} within {seconds:g} s") from None
            time.sleep(0.1)


class Viewer:
    """One live page: subscribes, counts events, and reconnects (counting it) when dropped."""

    def __init__(self, url: str, cookie: str, group: str) -> None:
        self.url, self.cookie, self.group = url, cookie, group
        self.origin = "http://" + url.split("//", 1)[1].split("/", 1)[0]  # the page's own origin
        self.events = 0
        self.reconnects = 0
        self.errors: list[str] = []

    async def run(self, stop: asyncio.Event) -> None:
        import websockets

        first = True
        while not stop.is_set():
            if not first:
                self.reconnects += 1
            first = False
            try:
                async with websockets.connect(
                    self.url,
                    origin=self.origin,  # type: ignore[arg-type]
                    additional_headers={"Cookie": self.cookie},
                    ping_interval=None,  # a browser sends none; the server's pings are answered
                    open_timeout=10,
                ) as ws:
                    await ws.send(json.dumps({"action": "subscribe", "group": self.group}))
                    while not stop.is_set():
                        try:
                            message = await asyncio.wait_for(ws.recv(), timeout=1.0)
                        except TimeoutError:
                            continue
                        if json.loads(message).get("type") == "event":
                            self.events += 1
                    return
            except Exception as exc:  # noqa: BLE001 - every way a socket can drop counts the same
                self.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                await asyncio.sleep(0.5)


async def watch(viewers: list[Viewer], seconds: float, progress: Any) -> None:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(v.run(stop)) for v in viewers]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
        await asyncio.to_thread(progress)  # the ORM, kept out of the event loop
    stop.set()
    await asyncio.gather(*tasks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--viewers", type=int, default=20)
    parser.add_argument("--out", type=Path, default=REPO / "var" / "reliability" / "soak_live.json")
    args = parser.parse_args()
    if args.minutes <= 0 or args.viewers < 1:
        parser.error("--minutes must be positive and --viewers at least 1")
    if shutil.which("redis-server") is None:
        parser.error("redis-server is missing (make setup installs it)")

    tmp = Path(tempfile.mkdtemp(prefix="crucible-soak-"))
    redis_port, web_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = {
        **os.environ,
        "CRUCIBLE_VAR_DIR": str(tmp),
        "REDIS_URL": redis_url,
        "CRUCIBLE_INSTANCE": "crucible-soak",
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "HF_HUB_OFFLINE": "1",
        "LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(argv: list[str], log: str) -> subprocess.Popen[bytes]:
        with (tmp / log).open("wb") as fh:
            proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    try:
        spawn(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            "redis.log",
        )
        wait_for_port(redis_port)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v0"], cwd=REPO, env=env, check=True)
        subprocess.run([*manage, "import_tasks", str(REPO / "demo" / "tasks"), "--suite", "soak"], cwd=REPO, env=env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        spawn(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(web_port), "webapp.asgi:application"],
            "daphne.log",
        )
        worker = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "webapp",
            "worker",
            "-Q",
            "rollouts,rewards",
            "--concurrency",
            "1",
        ]
        spawn([*worker, "--loglevel", "WARNING"], "worker.log")
        wait_for_port(web_port)

        import django

        sys.path.insert(0, str(REPO))
        django.setup()
        from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
        from django.contrib.auth.models import Group, User
        from django.contrib.sessions.backends.db import SessionStore

        from core.roles import REVIEWER
        from tasks.models import TaskSuite
        from trajectories.batches import cancel_batch, start_batch
        from trajectories.models import RolloutBatch, Trajectory
        from trajectories.rollout_settings import RolloutSettings

        user = User.objects.create_user("soak-viewer")
        user.groups.add(Group.objects.get_or_create(name=REVIEWER)[0])
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        cookie = f"sessionid={session.session_key}"

        # More trajectories than the soak can run: the batch is still going when it ends.
        suite = TaskSuite.objects.get(name="soak")
        samples = max(1, min(64, int(args.minutes * 60 / max(1, suite.tasks.count())) + 1))
        batch = start_batch(suite, RolloutSettings("scripted", samples=samples))
        url = f"ws://127.0.0.1:{web_port}/ws/"
        viewers = [Viewer(url, cookie, f"batch-{batch.pk}" if i % 2 == 0 else IDLE_GROUP) for i in range(args.viewers)]
        started = time.monotonic()

        def progress() -> None:
            done = Trajectory.objects.filter(batch=batch).exclude(status__in=["queued", "running"]).count()
            print(f"{time.monotonic() - started:6.0f} s: {done} trajectories done, "
                  f"{sum(v.events for v in viewers)} events seen, {sum(v.reconnects for v in viewers)} reconnects",
                  flush=True)  # fmt: skip

        # Django's ORM in this thread, the viewers' event loop in another.
        loop_thread = threading.Thread(target=lambda: asyncio.run(watch(viewers, args.minutes * 60, progress)))
        loop_thread.start()
        loop_thread.join()
        cancel_batch(RolloutBatch.objects.get(pk=batch.pk))
        finished = Trajectory.objects.filter(batch=batch, status="finished").count()
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()

    timeouts = {
        name: sum(line.count(marker) for line in (tmp / name).read_text(errors="replace").splitlines()
                  for marker in TIMEOUT_MARKERS)
        for name in ("daphne.log", "worker.log")
    }  # fmt: skip
    figures = {
        "minutes": args.minutes,
        "viewers": args.viewers,
        "idle_viewers": sum(v.group == IDLE_GROUP for v in viewers),
        "trajectories_finished": finished,
        "events_seen": sum(v.events for v in viewers),
        "reconnects": sum(v.reconnects for v in viewers),
        "redis_timeouts_logged": timeouts,
        "viewer_errors": sorted({e for v in viewers for e in v.errors})[:10],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    ok = figures["reconnects"] == 0 and not any(timeouts.values()) and figures["events_seen"] > 0
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"soak failed; logs kept in {tmp}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
