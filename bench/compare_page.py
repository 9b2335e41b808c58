"""The pairwise review page with two 2,000-line patches: server-side render time.

Django test client (no network), the median of repeated requests by the reviewer who holds
the pair, and the page's query count. Target: server <= 300 ms.
The page shows both diffs at once (escaped, coloured by line kind); the syntax-highlighted
versions come in two requests of their own that the page makes on load, cached by content
(annotation.pair_display): their cold and cached times are reported beside the page's.
Runs on a private SQLite database, and on PostgreSQL when the local server answers
(database `crucible_bench_compare`, so it never touches another bench's database).

The measuring half runs in a child process (python -m bench.compare_page child RUNS): Django
is set up once per process, with the database the parent put in DATABASE_URL.
"""

from __future__ import annotations

import json
import os
import statistics
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
PATCH_LINES = 2000
PG_DB = "crucible_bench_compare"
TARGET_MS = 300


def python_file(n: int, variant: int) -> str:
    """n lines of ordinary Python; `variant` changes some lines, so two versions differ."""
    lines = []
    for i in range(n):
        if i % 12 == 0:
            lines.append(f"def handler_{i}(request, *args, **kwargs):")
            lines.append(f'    """Handle request {i}: parse, validate and answer."""')
        elif i % 5 == 0 and variant:
            lines.append(f"    value_{i} = compute(request, {i} * {variant}, 'label {i}')  # variant {variant}")
        else:
            lines.append(f"    value_{i} = compute(request, {i}, 'label {i}')")
    return "\n".join(lines) + "\n"


def big_patch(variant: int) -> str:
    """A git diff of about PATCH_LINES lines over two files (hunks of context, removals and additions)."""
    from patches.build import text_patch
    from patches.render import render

    size = 400
    while True:
        files = [text_patch(f"app/handlers_{k}.py", python_file(size, 0), python_file(size, variant)) for k in (1, 2)]
        out = [p for p in files if p is not None]
        text = render(out)
        if len(text.splitlines()) >= PATCH_LINES:
            return text
        size += 50


def child(runs: int) -> dict[str, Any]:
    import django

    django.setup()
    # Models exist only once Django is set up.
    from django.contrib.auth.models import Group, User
    from django.core.cache import cache
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from annotation.pairs import PairRequest, draw_pairs
    from tasks.models import TaskSuite
    from tests.annotation.pairs_data import scored
    from tests.factories import TaskFactory

    call_command("migrate", verbosity=0)
    user = User.objects.create_user("bench", password="bench-pass-123")
    user.groups.add(Group.objects.get(name="reviewer"))
    suite = TaskSuite.objects.create(name="bench-compare")
    task = TaskFactory.create(suite=suite, task_id="bench-compare-1", statement="Make the handlers fast.\n" * 20)
    patches = [big_patch(3), big_patch(7)]
    for i, patch in enumerate(patches):
        scored(task, patch, reward=1.0 - i / 2, f2p=(2 - i, 2))
    cset = draw_pairs(PairRequest(name="bench", suite=suite.name, strategy="random", max_pairs=1))
    client = Client()
    client.login(username="bench", password="bench-pass-123")
    url = client.get(f"/annotation/sets/{cset.name}/next/")["Location"]
    # Inside a transaction the connection stays open across the request, so every query counts.
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        html = client.get(url).content
    page_queries = len(queries)
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.status_code
    pk = url.rstrip("/").split("/")[-1]

    def highlight_ms(clear: bool) -> float:
        """Both sides' highlighted diffs (the requests the page makes on load), cold or cached."""
        if clear:
            cache.clear()
        started = time.perf_counter()
        for side in ("left", "right"):
            assert client.get(f"/annotation/compare/{pk}/diff/{side}/").status_code == 200
        return (time.perf_counter() - started) * 1000

    cold = [highlight_ms(clear=True) for _ in range(max(3, runs // 5))]
    cached = [highlight_ms(clear=False) for _ in range(runs)]
    cached_page = []
    for _ in range(runs):
        started = time.perf_counter()
        client.get(url)
        cached_page.append((time.perf_counter() - started) * 1000)
    return {
        "page_p50_ms": round(statistics.median(timings), 1),
        "page_highlighted_from_cache_p50_ms": round(statistics.median(cached_page), 1),
        "highlight_both_cold_p50_ms": round(statistics.median(cold), 1),
        "highlight_both_cached_p50_ms": round(statistics.median(cached), 1),
        "page_max_ms": round(max(timings), 1),
        "page_queries": page_queries,
        "page_kb": len(html) // 1024,
        "patch_lines": [len(p.splitlines()) for p in patches],
    }


def _measure(database_url: str, tmp: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CRUCIBLE_VAR_DIR": str(tmp / "var"),
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.compare_page", "child", str(RUNS)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-compare-") as name:
        tmp = Path(name)
        started = time.perf_counter()
        result: dict[str, Any] = {"runs": RUNS, "sqlite": _measure(f"sqlite:///{tmp / 'compare.sqlite3'}", tmp)}
        pg = fresh_postgres(PG_DB)
        result["postgresql"] = _measure(pg, tmp) if pg else "unavailable"
        result["seconds"] = round(time.perf_counter() - started, 1)
    result["targets"] = {"page_p50_ms": TARGET_MS}
    result["summary"] = {
        db: {
            k: result[db][k]
            for k in ("page_p50_ms", "page_queries", "highlight_both_cold_p50_ms", "page_highlighted_from_cache_p50_ms")
        }
        for db in ("sqlite", "postgresql")
        if isinstance(result[db], dict)
    }
    result["checks"] = [
        check(
            f"compare page, two {PATCH_LINES}-line patches ({db})",
            result[db]["page_p50_ms"],
            TARGET_MS,
            better="lower",
            unit=" ms",
        )
        for db in ("sqlite", "postgresql")
        if isinstance(result[db], dict)
    ]
    result["summary"]["meets_target"] = all(
        result[db]["page_p50_ms"] <= TARGET_MS for db in ("sqlite", "postgresql") if isinstance(result[db], dict)
    )
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        print(json.dumps(child(int(sys.argv[2]))))
    else:
        print(json.dumps(run(), indent=2))
