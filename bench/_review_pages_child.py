"""The measuring half of bench/review_pages.py, run in a child process:

    python -m bench._review_pages_child RUNS LIST_SIZE [--browser]

A child, because Django is set up once per process and each database (SQLite,
PostgreSQL) needs its own settings: the parent sets DATABASE_URL and
DJANGO_SETTINGS_MODULE in the child's environment. Prints one JSON object.

Server side (Django test client, no network), in interleaved rounds so that a busy machine
slows every request alike: the floor (bench/_review_pages_urls.py: session, user, role check,
nothing else), the trajectory page at 1,000 steps / 10 MB, one chunk of its steps loaded on
demand, and the trajectory list over LIST_SIZE trajectories. With --browser, also a 10,000-step
/ 100 MB trajectory: its page server side in the same rounds, then in Chromium against a Daphne
server on the same database, interleaved with the login page there: first contentful paint and
DOMContentLoaded of each, from navigation start (so the server's time is inside).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import django

from core.vocabulary import ActionType, PolicyKind, Termination

POLICIES = (PolicyKind.HF, PolicyKind.OPENAI, PolicyKind.SCRIPTED)
BATCH = 5000
BIG_STEPS = 1000  # x 10 kB of observation: 10 MB
HUGE_STEPS = 10_000  # 100 MB
OBSERVATION = "x" * 10_000
START = datetime(2025, 1, 1, tzinfo=UTC)
REPO = Path(__file__).resolve().parent.parent
URLS = "bench._review_pages_urls"
FLOOR = "/bench/floor/"
PASSWORD = "bench-pass-123"  # noqa: S105 - a throwaway user of a throwaway database
BROWSER_RUNS = int(os.environ.get("BENCH_BROWSER_RUNS", "7"))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
# Read once the page has painted: its first contentful paint and DOMContentLoaded, in ms
# from navigation start.
PAINT_TIMES = """() => new Promise((resolve) => {
  const started = Date.now();
  (function read() {
    const paint = performance.getEntriesByName("first-contentful-paint")[0];
    const nav = performance.getEntriesByType("navigation")[0];
    if (paint && nav && nav.domContentLoadedEventEnd) {
      resolve({ fcp: paint.startTime, dcl: nav.domContentLoadedEventEnd, bytes: nav.decodedBodySize });
    } else if (Date.now() - started > 10000) {
      resolve(null);
    } else {
      setTimeout(read, 10);
    }
  })();
})"""


def main(argv: list[str]) -> int:
    runs, size, browser = int(argv[0]), int(argv[1]), "--browser" in argv[2:]
    django.setup()
    # Models exist only once Django is set up, so they are imported here.
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings

    from tasks.models import TaskSuite
    from trajectories.models import Trajectory

    call_command("migrate", verbosity=0)
    user = User.objects.create_user("bench", password=PASSWORD)
    user.groups.add(Group.objects.get(name="reviewer"))
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
    big = _long_trajectory("task_big", BIG_STEPS)
    huge = _long_trajectory("task_huge", HUGE_STEPS) if browser else None

    with override_settings(ROOT_URLCONF=URLS):
        client = Client()
        client.login(username="bench", password=PASSWORD)
        urls = {
            "floor": FLOOR,
            "page": f"/trajectories/{big.trajectory_id}/",
            "chunk": f"/trajectories/{big.trajectory_id}/steps/?after={BIG_STEPS // 2}",
            "list": f"/trajectories/?suite=suite-3&success=true&policy={PolicyKind.HF}",
        }
        if huge is not None:
            urls["page_10k"] = f"/trajectories/{huge.trajectory_id}/"
        sizes, queries = {}, {}
        for name, url in urls.items():
            # Inside a transaction the connection stays open across the request, so every
            # query the page makes is counted; this first request also warms templates and plans.
            with transaction.atomic(), CaptureQueriesContext(connection) as captured:
                response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
            sizes[name], queries[name] = len(response.content), len(captured)
        times = _rounds(lambda url: client.get(url).status_code, urls, runs)

    p50 = {name: statistics.median(values) for name, values in times.items()}
    result: dict[str, Any] = {
        "floor_p50_ms": p50["floor"],
        "page_p50_ms": p50["page"],
        "page_ratio": p50["page"] / p50["floor"],
        "page_queries": queries["page"],
        "page_kb": sizes["page"] // 1024,
        "chunk_p50_ms": p50["chunk"],
        "chunk_queries": queries["chunk"],
        "list_p50_ms": p50["list"],
        "trajectories": Trajectory.objects.count(),
    }
    if huge is not None:
        result |= {
            "page_10k_p50_ms": p50["page_10k"],
            "page_10k_ratio": p50["page_10k"] / p50["floor"],
            "page_10k_queries": queries["page_10k"],
            "page_10k_kb": sizes["page_10k"] // 1024,
        }
        connection.close()  # the browser's server has the database to itself from here
        result["browser"] = _in_browser(f"/trajectories/{huge.trajectory_id}/")
    print(json.dumps(result))
    return 0


def _long_trajectory(task_ref: str, steps: int) -> Any:
    """A trajectory of `steps` steps, each with a 10 kB observation."""
    from trajectories.bulk import insert_steps, step_row
    from trajectories.models import Trajectory

    trajectory = Trajectory.objects.create(
        trajectory_id=uuid.uuid4(), task_ref=task_ref, created_at=START, step_count=steps
    )
    for chunk in range(0, steps, 100):
        insert_steps(
            [
                step_row(
                    trajectory.pk,
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
                for n in range(chunk + 1, min(chunk + 101, steps + 1))
            ]
        )
    return trajectory


def _rounds(get: Callable[[str], int], urls: dict[str, str], runs: int) -> dict[str, list[float]]:
    """Each URL once per round, the order turning from round to round, so that load and
    caches fall on every URL alike."""
    names = list(urls)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(runs):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            started = time.perf_counter()
            status = get(urls[name])
            times[name].append((time.perf_counter() - started) * 1000)
            assert status == 200, (name, status)
    return times


def _in_browser(page_path: str) -> dict[str, Any] | str:
    """First paint of the page in Chromium, served by Daphne, beside the login page's."""
    if not os.path.exists(CHROMIUM):
        return "unavailable: no chromium"
    from playwright.sync_api import sync_playwright

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.asgi:application"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(f"{base}/login/")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
            # The driver's reads run as page scripts, which the site's CSP (no eval) would refuse.
            context = browser.new_context(bypass_csp=True)
            page = context.new_page()
            page.goto(f"{base}/login/")
            page.fill("input[name=username]", "bench")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_selector("h1:has-text('Dashboard')")
            # Daphne serves the site's own URLs: the floor here is its plainest page, the login
            # form, with the same style sheet and scripts.
            paths = {"floor": "/login/", "page": page_path}
            page.goto(f"{base}{page_path}")  # warm: templates, query plans, static files cached
            steps_shown = page.locator("li.step").count()
            seen: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
            for r in range(BROWSER_RUNS):
                for name in list(paths)[r % 2 :] + list(paths)[: r % 2]:
                    page.goto(f"{base}{paths[name]}", wait_until="load")
                    timing = page.evaluate(PAINT_TIMES)
                    if timing is not None:
                        seen[name].append(timing)
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    if not seen["page"]:
        return "unavailable: no paint timing"
    median = statistics.median
    return {
        "runs": len(seen["page"]),
        "first_paint_ms": median(t["fcp"] for t in seen["page"]),
        "dom_content_loaded_ms": median(t["dcl"] for t in seen["page"]),
        "page_kb": int(seen["page"][0]["bytes"]) // 1024,
        "steps_rendered": steps_shown,
        "floor_first_paint_ms": median(t["fcp"] for t in seen["floor"]) if seen["floor"] else None,
    }


def _wait_for(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - our own http URL
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the server did not answer at {url}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
