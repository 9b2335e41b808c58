"""Review pages under load: a 1,000-step / 10 MB trajectory page, and the trajectory list
filtered over 100k trajectories. Server-side time (Django test client, no network),
median of repeated requests, and the page's query count.

Targets (DESIGN.md): trajectory page p50 <= 300 ms with <= 15 queries; list p50 <= 200 ms.
Runs on a private SQLite database (and PostgreSQL when BENCH_POSTGRES_URL or the local
server answers).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_PAGE_RUNS", "15"))
LIST_SIZE = int(os.environ.get("BENCH_LIST_SIZE", "100000"))

CHILD = r"""
import json, os, statistics, sys, time, uuid
from datetime import UTC, datetime, timedelta
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from tasks.models import TaskSuite
from trajectories.bulk import insert_steps, step_row
from trajectories.models import Trajectory

runs, size = int(sys.argv[1]), int(sys.argv[2])
user = User.objects.create_user("bench", password="bench-pass-123")
user.groups.add(Group.objects.get(name="reviewer"))
client = Client()
client.login(username="bench", password="bench-pass-123")
suites = [TaskSuite.objects.create(name=f"suite-{i}") for i in range(5)]
start = datetime(2025, 1, 1, tzinfo=UTC)
for offset in range(0, size, 5000):
    Trajectory.objects.bulk_create([
        Trajectory(trajectory_id=uuid.uuid4(), task_ref=f"task_{i % 300:04d}", suite=suites[i % 5],
                   policy_kind=("hf", "openai", "scripted")[i % 3], policy_model="m", success=i % 7 == 0,
                   final_reward=(i % 7 == 0) * 1.0, termination="submitted", step_count=10,
                   created_at=start + timedelta(seconds=i))
        for i in range(offset, min(offset + 5000, size))])
big = Trajectory.objects.create(trajectory_id=uuid.uuid4(), task_ref="task_big", created_at=start, step_count=1000)
filler = "x" * 10_000
for chunk in range(0, 1000, 100):
    insert_steps([step_row(big.pk, {"step": n, "action_type": "run_command", "action_input": {"command": f"make {n}"},
                  "observation": f"step {n}\n" + filler, "observation_truncated": False, "thought": "look again",
                  "reward": 0.0, "reward_breakdown": {}, "timestamp": start, "duration_ms": 5.0, "exit_code": 0,
                  "extra": {}}) for n in range(chunk + 1, chunk + 101)])

def timed(url):
    client.get(url)
    out = []
    for _ in range(runs):
        t = time.perf_counter(); response = client.get(url); out.append((time.perf_counter() - t) * 1000)
        assert response.status_code == 200, response.status_code
    return out

page_url = f"/trajectories/{big.trajectory_id}/"
# Inside a transaction the connection stays open across the request, so every query
# the page makes is counted.
with transaction.atomic(), CaptureQueriesContext(connection) as queries:
    html = client.get(page_url).content
page_queries = len(queries)  # read now: later requests reset the connection's query log
page = timed(page_url)
listing = timed("/trajectories/?suite=suite-3&success=true&policy=hf")
print(json.dumps({"page_p50_ms": statistics.median(page), "page_queries": page_queries, "page_kb": len(html) // 1024,
                  "list_p50_ms": statistics.median(listing), "trajectories": Trajectory.objects.count()}))
"""


def _measure(database_url: str, tmp: Path) -> dict[str, Any]:
    env = {**os.environ, "DATABASE_URL": database_url, "CRUCIBLE_VAR_DIR": str(tmp / "var"),
           "DJANGO_SETTINGS_MODULE": "webapp.settings", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(RUNS), str(LIST_SIZE)], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True)
    import json

    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in result.items()}


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-pages-") as name:
        tmp = Path(name)
        started = time.perf_counter()
        result: dict[str, Any] = {"sqlite": _measure(f"sqlite:///{tmp / 'pages.sqlite3'}", tmp)}
        from bench.jsonl_io import _postgres_url

        pg = _postgres_url()
        result["postgresql"] = _measure(pg, tmp) if pg else "unavailable"
        result["seconds"] = round(time.perf_counter() - started, 1)
    result["targets"] = {"page_p50_ms": 300, "page_queries": 15, "list_p50_ms": 200}
    result["summary"] = {db: {k: result[db][k] for k in ("page_p50_ms", "page_queries", "list_p50_ms")}
                         for db in ("sqlite", "postgresql") if isinstance(result[db], dict)}
    return result
