"""API export of 200k steps from a real server process, its peak RSS sampled with psutil.

A fresh database gets 2,000 trajectories of 100 steps (bench.synthetic), a researcher and an
API token; uvicorn serves `webapp.asgi:application`; an httpx client streams
`GET /api/v1/exports/trajectories/?format=jsonl` and counts the records: redacted (what every
researcher gets: each record scanned by core.redaction) and unredacted (an admin's
`?unredacted=1`: the export path alone). Targets: >= 50k steps/s, server RSS <= 300 MB.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.checks import check
from bench.databases import fresh_postgres
from bench.synthetic import write_jsonl

REPO = Path(__file__).resolve().parent.parent
TRAJECTORIES, STEPS_PER = 2000, 100
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
PG_BENCH_DB = "crucible_bench_export"
TARGETS = {"steps_per_s": 50000, "rss_mb": 300}
CREATE_USER = """
from django.contrib.auth.models import Group, User
from core.tokens import create_token
user = User.objects.create_user("bench-admin")
user.groups.add(Group.objects.get_or_create(name="admin")[0])
print(create_token(user, "bench")[1])
"""


def _database(tmp: Path) -> str:
    return fresh_postgres(PG_BENCH_DB) or f"sqlite:///{tmp / 'bench.sqlite3'}"


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RssSampler(threading.Thread):
    """The server's resident memory (with any children) every few milliseconds; the peak is kept."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.peak = 0
        self.stopped = threading.Event()

    def rss(self) -> int:
        processes = [self.process, *self.process.children(recursive=True)]
        return sum(p.memory_info().rss for p in processes)

    def cpu_s(self) -> float:
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.peak = max(self.peak, self.rss())
            except psutil.NoSuchProcess:
                return
            time.sleep(0.005)


def _wait_ready(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("the server exited before it answered")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError("the server did not answer within 60 s")


def _stream(url: str, token: str) -> tuple[float, int, int]:
    started = time.perf_counter()
    lines = size = 0
    with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            lines += chunk.count(b"\n")
            size += len(chunk)
    return time.perf_counter() - started, lines, size


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-") as name:
        tmp = Path(name)
        source = tmp / "in.jsonl"
        steps = write_jsonl(source, TRAJECTORIES, STEPS_PER)
        database = _database(tmp)
        env = {
            **os.environ,
            "DATABASE_URL": database,
            "CRUCIBLE_VAR_DIR": str(tmp / "var"),
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
        }
        _manage(env, "migrate", "-v0")
        _manage(env, "import_trajectories", str(source), "--allow-unknown-tasks", "-v0")
        token = _manage(env, "shell", "-c", CREATE_USER).strip().splitlines()[-1]
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "webapp.asgi:application", "--port", str(port), "--no-access-log"],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_ready(f"{base}/api/v1/", server)
            sampler = RssSampler(server.pid)
            idle_mb = sampler.rss() / 1e6
            sampler.start()
            url = f"{base}/api/v1/exports/trajectories/?format=jsonl"
            cpu = [sampler.cpu_s()]
            runs = [_stream(url, token) for _ in range(REPEATS)]
            cpu.append(sampler.cpu_s())
            raw = [_stream(url + "&unredacted=1", token) for _ in range(REPEATS)]
            cpu.append(sampler.cpu_s())
            sampler.stopped.set()
            sampler.join()
        finally:
            server.terminate()
            _, stderr = server.communicate(timeout=30)
    seconds = [s for s, _, _ in runs]
    raw_seconds = [s for s, _, _ in raw]
    if any(lines != TRAJECTORIES for _, lines, _ in runs + raw):
        raise RuntimeError(f"the export returned {[n for _, n, _ in runs + raw]} records, not {TRAJECTORIES}")
    summary: dict[str, Any] = {
        "steps_per_s": round(steps / statistics.median(seconds)),
        "steps_per_s_unredacted": round(steps / statistics.median(raw_seconds)),
        "peak_rss_mb": round(sampler.peak / 1e6, 1),
        "idle_rss_mb": round(idle_mb, 1),
        # The server's own CPU time: what the throughput would be on an otherwise idle core.
        "steps_per_server_cpu_s": round(steps * REPEATS / (cpu[1] - cpu[0])),
        "steps_per_server_cpu_s_unredacted": round(steps * REPEATS / (cpu[2] - cpu[1])),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "targets": TARGETS,
    }
    checks = [
        check("API export steps/s", summary["steps_per_s"], TARGETS["steps_per_s"], better="higher"),
        check("API export server peak RSS", summary["peak_rss_mb"], TARGETS["rss_mb"], better="lower", unit=" MB"),
    ]
    return {
        "server": "uvicorn webapp.asgi:application",
        "checks": checks,
        "database": database.split(":", 1)[0],
        "steps": steps,
        "mb": round(runs[0][2] / 1e6, 1),
        "export_s": [round(s, 3) for s in seconds],
        "export_unredacted_s": [round(s, 3) for s in raw_seconds],
        "summary": summary,
        "server_log_tail": stderr.decode(errors="replace")[-500:] if stderr else "",
    }
