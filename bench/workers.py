"""What the fleet benches share: a fresh database by URL, real Celery worker processes, the machine's CPU ticks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent


def fresh_database(url: str) -> None:
    """Drop (forcing other sessions off) and create the database `url` names."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def start_workers(count: int, tmp: Path, queues: str, prefix: str) -> list[subprocess.Popen[bytes]]:
    """`count` worker processes (`--pool solo`), each with its own var dir as separate hosts would
    have; returned once every one answers a ping."""
    from celery import current_app

    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", queues, "--pool", "solo"]
            + ["-n", f"{prefix}-{index}@%h", "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
            cwd=REPO,
            env={**os.environ, "CRUCIBLE_VAR_DIR": str(tmp / f"var-{prefix}-{index}")},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for index in range(count)
    ]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        replies = current_app.control.ping(timeout=1.0) or []
        if sum(1 for reply in replies for name in reply if name.startswith(f"{prefix}-")) >= count:
            return procs
    stop(procs)
    raise RuntimeError(f"{count} workers did not answer within 120 s")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def cpu_ticks() -> tuple[int, int]:
    """Busy and total CPU ticks of the whole machine (/proc/stat): every process, PostgreSQL and Redis included."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return total - idle, total
