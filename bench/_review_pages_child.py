"""The measuring half of bench/review_pages.py, run in a child process:

    python -m bench._review_pages_child RUNS LIST_SIZE

A child, because Django is set up once per process and each database (SQLite,
PostgreSQL) needs its own settings: the parent sets DATABASE_URL and
DJANGO_SETTINGS_MODULE in the child's environment. Prints one JSON object.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import django

from core.vocabulary import ActionType, PolicyKind, Termination

POLICIES = (PolicyKind.HF, PolicyKind.OPENAI, PolicyKind.SCRIPTED)
BATCH = 5000
BIG_STEPS = 1000
OBSERVATION = "x" * 10_000
START = datetime(2025, 1, 1, tzinfo=UTC)


def main(argv: list[str]) -> int:
    runs, size = int(argv[0]), int(argv[1])
    django.setup()
    # Models exist only once Django is set up, so they are imported here.
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from tasks.models import TaskSuite
    from trajectories.bulk import insert_steps, step_row
    from trajectories.models import Trajectory

    call_command("migrate", verbosity=0)
    user = User.objects.create_user("bench", password="bench-pass-123")
    user.groups.add(Group.objects.get(name="reviewer"))
    client = Client()
    client.login(username="bench", password="bench-pass-123")
    suites = [TaskSuite.objects.create(name=f"suite-{i}") for i in range(5)]
    for offset in range(0, size, BATCH):
        Trajectory.objects.bulk_create(
            [
                Trajectory(
                    trajectory_id=uuid.uuid4(),
                    task_ref=f"task_{i % 300:04d}",
                    suite=suites[i % 5],
                    policy_kind=POLICIES[i % 3],
                    policy_model="m",
                    success=i % 7 == 0,
                    final_reward=(i % 7 == 0) * 1.0,
                    termination=Termination.SUBMITTED,
                    step_count=10,
                    created_at=START + timedelta(seconds=i),
                )
                for i in range(offset, min(offset + BATCH, size))
            ]
        )
    big = Trajectory.objects.create(
        trajectory_id=uuid.uuid4(), task_ref="task_big", created_at=START, step_count=BIG_STEPS
    )
    for chunk in range(0, BIG_STEPS, 100):
        insert_steps(
            [
                step_row(
                    big.pk,
                    {
                        "step": n,
                        "action_type": ActionType.RUN_COMMAND,
                        "action_input": {"command": f"make {n}"},
                        "observation": f"step {n}\n" + OBSERVATION,
                        "observation_truncated": False,
                        "thought": "look again",
                        "reward": 0.0,
                        "reward_breakdown": {},
                        "timestamp": START,
                        "duration_ms": 5.0,
                        "exit_code": 0,
                        "extra": {},
                    },
                )
                for n in range(chunk + 1, chunk + 101)
            ]
        )

    def timed(url: str) -> list[float]:
        client.get(url)  # warm: templates, the first query plans
        out = []
        for _ in range(runs):
            started = time.perf_counter()
            response = client.get(url)
            out.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.status_code
        return out

    page_url = f"/trajectories/{big.trajectory_id}/"
    # Inside a transaction the connection stays open across the request, so every query
    # the page makes is counted.
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        html = client.get(page_url).content
    page_queries = len(queries)  # read now: later requests reset the connection's query log
    page = timed(page_url)
    listing = timed(f"/trajectories/?suite=suite-3&success=true&policy={PolicyKind.HF}")
    result: dict[str, Any] = {
        "page_p50_ms": statistics.median(page),
        "page_queries": page_queries,
        "page_kb": len(html) // 1024,
        "list_p50_ms": statistics.median(listing),
        "trajectories": Trajectory.objects.count(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
