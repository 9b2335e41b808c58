"""Review pages under load: the trajectory page at 1,000 steps / 10 MB and at 10,000 steps /
100 MB, and the trajectory list filtered over 100k trajectories.

Server side (Django test client, no network): medians of interleaved rounds of the page, one
chunk of its steps loaded on demand, the list, and a floor, a view that only loads the session
and the user (bench/_review_pages_urls.py), so the page's ratio to the floor holds whatever the
machine's load. In Chromium (PostgreSQL, or SQLite without it): the 10,000-step page's first
contentful paint and DOMContentLoaded, served by Daphne.

Checks: page <= 20x the floor, <= 150 ms p50 on PostgreSQL, <= 15 queries; the list <= 200 ms
p50; the 10,000-step page's first paint <= 1 s.
Runs on a private SQLite database, and on PostgreSQL when the local server answers (database
`crucible_bench_pages`, so it never touches another bench's database).
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

from bench.checks import check
from bench.databases import fresh_postgres

REPO = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_PAGE_RUNS", "15"))
LIST_SIZE = int(os.environ.get("BENCH_LIST_SIZE", "100000"))
# What the summary line shows of each database's figures (the 10,000-step ones where measured).
FIGURES = ("floor_p50_ms", "page_p50_ms", "page_ratio", "page_queries", "chunk_p50_ms", "list_p50_ms")
FIGURES_10K = ("page_10k_p50_ms", "browser")


def _measure(database_url: str, tmp: Path, *, browser: bool) -> dict[str, Any]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CRUCIBLE_VAR_DIR": str(tmp / "var"),
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "bench._review_pages_child", str(RUNS), str(LIST_SIZE), *(["--browser"] * browser)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return _rounded(result)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-pages-") as name:
        tmp = Path(name)
        started = time.perf_counter()
        pg = fresh_postgres("crucible_bench_pages")
        result: dict[str, Any] = {
            "runs": RUNS,
            "sqlite": _measure(f"sqlite:///{tmp / 'pages.sqlite3'}", tmp / "sqlite", browser=pg is None),
        }
        result["postgresql"] = _measure(pg, tmp / "postgresql", browser=True) if pg else "unavailable"
        result["seconds"] = round(time.perf_counter() - started, 1)
    db = "postgresql" if pg else "sqlite"
    measured = result[db]
    result["checks"] = [
        check(
            f"page 1k steps / 10 MB vs floor ({db})",
            measured["page_ratio"],
            20,
            better="lower",
            unit="x",
            floor="a view that loads the session and the user",
        ),
        check(f"page 1k steps / 10 MB p50 ({db})", measured["page_p50_ms"], 150, better="lower", unit=" ms"),
        check(f"page queries ({db})", measured["page_queries"], 15, better="lower"),
        check(f"list over {LIST_SIZE // 1000}k p50 ({db})", measured["list_p50_ms"], 200, better="lower", unit=" ms"),
    ]
    browser = measured.get("browser")
    if isinstance(browser, dict):
        result["checks"].append(
            check(
                f"10k steps / 100 MB first paint, Chromium ({db})",
                browser["first_paint_ms"],
                1000,
                better="lower",
                unit=" ms",
            )
        )
    result["summary"] = {
        db: {k: result[db][k] for k in (*FIGURES, *FIGURES_10K) if k in result[db]}
        for db in ("sqlite", "postgresql")
        if isinstance(result[db], dict)
    }
    return result
