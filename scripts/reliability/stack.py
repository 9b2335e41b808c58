"""A private Crucible on loopback for the load runs: its own Redis, SQLite, daphne and Celery worker.

Nothing on the machine is touched: Redis on a free port without persistence, the database in
a temporary var directory (DATABASE_URL is ignored, so a run never writes to a real database),
the API's per-user throttle lifted (the runs measure the server, not the throttle).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nothing answered on port {port} within {seconds:g} s") from None
            time.sleep(0.1)


class Stack:
    """Started with `start()`, ended with `stop()`; Django is set up in this process against it."""

    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            raise SystemExit("redis-server is missing (make setup installs it)")
        self.tmp = Path(tempfile.mkdtemp(prefix="crucible-load-"))
        self.redis_port, self.web_port = free_port(), free_port()
        self.env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        self.env.update(
            {
                "CRUCIBLE_VAR_DIR": str(self.tmp),
                "REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
                "CRUCIBLE_INSTANCE": "crucible-load",
                "DJANGO_SETTINGS_MODULE": "webapp.settings",
                "HF_HUB_OFFLINE": "1",
                "LOG_LEVEL": "WARNING",
                "CRUCIBLE_API_RATE_USER": "1000000/min",
            }
        )
        self.procs: list[subprocess.Popen[bytes]] = []
        self.base_url = f"http://127.0.0.1:{self.web_port}"
        self.ws_url = f"ws://127.0.0.1:{self.web_port}/ws/"
        self.cookie = ""
        self.token = ""

    def spawn(self, argv: list[str], log: str) -> subprocess.Popen[bytes]:
        with (self.tmp / log).open("wb") as fh:
            proc = subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=fh, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def start(self, suite: str = "load") -> None:
        argv = ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
        self.spawn([*argv, "no"], "redis.log")
        wait_for_port(self.redis_port)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v0"], cwd=REPO, env=self.env, check=True)
        subprocess.run(
            [*manage, "import_tasks", str(REPO / "demo" / "tasks"), "--suite", suite],
            cwd=REPO,
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        daphne = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.web_port)]
        self.spawn([*daphne, "webapp.asgi:application"], "daphne.log")
        os.environ.update(self.env)
        os.environ.pop("DATABASE_URL", None)
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        self._login()
        wait_for_port(self.web_port)

    def _login(self) -> None:
        from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
        from django.contrib.auth.models import Group, User
        from django.contrib.sessions.backends.db import SessionStore
        from rest_framework.authtoken.models import Token

        from core.roles import RESEARCHER

        user = User.objects.create_user("load-researcher")
        user.groups.add(Group.objects.get_or_create(name=RESEARCHER)[0])
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        self.cookie = f"sessionid={session.session_key}"
        self.token = Token.objects.create(user=user).key

    def worker(self, queues: str, concurrency: int = 1, log: str = "worker.log") -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", queues, "--concurrency"]
        return self.spawn(
            [*argv, str(concurrency), "--without-gossip", "--without-mingle", "--loglevel", "WARNING"], log
        )

    def scripted_batch(self, samples: int, suite: str = "load", **kwargs: Any) -> Any:
        from tasks.models import TaskSuite
        from trajectories.batches import start_batch
        from trajectories.rollout_settings import RolloutSettings

        return start_batch(TaskSuite.objects.get(name=suite), RolloutSettings("scripted", samples=samples), **kwargs)

    def stop(self, keep: bool = False) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if keep:
            print(f"logs kept in {self.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))], 2)
