"""Review pages under load: a 1,000-step / 10 MB trajectory page, and the trajectory list
filtered over 100k trajectories. Server-side time (Django test client, no network),
median of repeated requests, and the page's query count.

Targets: trajectory page p50 <= 300 ms with <= 15 queries; list p50 <= 200 ms.
Runs on a private SQLite database (and PostgreSQL when BENCH_POSTGRES_URL or the local
server answers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.jsonl_io import postgres_url

REPO = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_PAGE_RUNS", "15"))
LIST_SIZE = int(os.environ.get("BENCH_LIST_SIZE", "100000"))


def _measure(database_url: str, tmp: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CRUCIBLE_VAR_DIR": str(tmp / "var"),
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench._review_pages_child", str(RUNS), str(LIST_SIZE)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in result.items()}


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-pages-") as name:
        tmp = Path(name)
        started = time.perf_counter()
        result: dict[str, Any] = {"sqlite": _measure(f"sqlite:///{tmp / 'pages.sqlite3'}", tmp)}
        pg = postgres_url()
        result["postgresql"] = _measure(pg, tmp) if pg else "unavailable"
        result["seconds"] = round(time.perf_counter() - started, 1)
    result["targets"] = {"page_p50_ms": 300, "page_queries": 15, "list_p50_ms": 200}
    result["summary"] = {
        db: {k: result[db][k] for k in ("page_p50_ms", "page_queries", "list_p50_ms")}
        for db in ("sqlite", "postgresql")
        if isinstance(result[db], dict)
    }
    return result
