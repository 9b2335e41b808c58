"""JSONL import and export of 200k steps, on SQLite and PostgreSQL.

Each measured run is a fresh `manage.py` process, so peak RSS is the whole command's.
Targets: import >= 20k steps/s on PostgreSQL, >= 10k on SQLite; export
>= 50k steps/s; RSS <= 300 MB.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.synthetic import write_jsonl

REPO = Path(__file__).resolve().parent.parent
TRAJECTORIES, STEPS_PER = 2000, 100
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
PG_ADMIN_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
PG_BENCH_DB = "crucible_bench"


def _child(op: str, path: Path, env: dict[str, str]) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench._jsonl_io_child", op, str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed, _base, peak = done.stdout.strip().splitlines()[-1].split()
    return float(elapsed), int(peak) / 1024


def _measure(database_url: str, source: Path, tmp: Path) -> dict[str, Any]:
    env = {**os.environ, "DATABASE_URL": database_url, "CRUCIBLE_VAR_DIR": str(tmp / "var")}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    steps = TRAJECTORIES * STEPS_PER
    imports, exports, rss = [], [], []
    for _ in range(REPEATS):
        _child("clear", source, env)
        seconds, peak = _child("import", source, env)
        imports.append(seconds)
        rss.append(peak)
        seconds, peak = _child("export", tmp / "out.jsonl", env)
        exports.append(seconds)
        rss.append(peak)
    return {
        "steps": steps,
        "import_s": [round(s, 3) for s in imports],
        "export_s": [round(s, 3) for s in exports],
        "import_steps_per_s": round(steps / statistics.median(imports)),
        "export_steps_per_s": round(steps / statistics.median(exports)),
        "peak_rss_mb": round(max(rss), 1),
    }


def postgres_url() -> str | None:
    try:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB}")
            conn.execute(f"CREATE DATABASE {PG_BENCH_DB}")
    except psycopg.OperationalError:
        return None
    return PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + PG_BENCH_DB


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-") as name:
        tmp = Path(name)
        source = tmp / "in.jsonl"
        started = time.perf_counter()
        write_jsonl(source, TRAJECTORIES, STEPS_PER)
        result: dict[str, Any] = {
            "file_mb": round(source.stat().st_size / 1e6, 1),
            "repeats": REPEATS,
            "generate_s": round(time.perf_counter() - started, 2),
            "sqlite": _measure(f"sqlite:///{tmp / 'bench.sqlite3'}", source, tmp),
        }
        pg = postgres_url()
        result["postgresql"] = _measure(pg, source, tmp) if pg else "unavailable"
    targets = {"import_postgresql": 20000, "import_sqlite": 10000, "export": 50000, "rss_mb": 300}
    summary: dict[str, Any] = {"targets": targets}
    for db in ("sqlite", "postgresql"):
        if isinstance(result[db], dict):
            summary[db] = {k: result[db][k] for k in ("import_steps_per_s", "export_steps_per_s", "peak_rss_mb")}
    result["summary"] = summary
    return result
