"""GRPO agent-mode throughput: episodes on two rollout workers vs inside the trainer.

The same run twice: a GRPO agent run of the tiny "mixed" policy (tests/training/trainer_support.py:
it opens with submit or a command, so groups differ) on demo tasks, for BENCH_GRPO_FLEET_STEPS
optimizer steps of BENCH_GRPO_FLEET_BATCH episodes each.
- `trainer`: TRL's environment_factory runs every episode's tools and scoring in the trainer's process;
- `fleet`: the trainer serves the policy, and two Celery worker processes (queues rollouts and
  rewards, `--pool solo`, each with its own var dir as separate hosts would be) run and score the
  episodes (training.trainers.grpo_fleet), each step waiting for its own (rl.max_staleness 0);
- `fleet_ahead`: the same with rl.max_staleness 1, the next step's episodes running while a step trains.
The check is fleet_ahead over trainer; `ceiling_from_cpu` says how much any fleet could gain on
this machine (its cores over those the in-trainer run already keeps busy).

Throughput is episodes per minute of training proper: from the trainer's "grpo (...)" line (model
loaded, trainer built) to its last metric event, so start-up costs neither side. Runs on a private
PostgreSQL database (BENCH_DATABASE_URL, dropped and made afresh) and Redis database 13.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from bench.checks import check

REPO = Path(__file__).resolve().parent.parent
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crucible_bench_grpo_fleet")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
STEPS = int(os.environ.get("BENCH_GRPO_FLEET_STEPS", "2"))
BATCH = int(os.environ.get("BENCH_GRPO_FLEET_BATCH", "8"))
WORKERS = 2
TARGET = 1.6


def _fresh_database() -> None:
    import psycopg

    parts = urlsplit(DATABASE_URL)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _setup(tmp: Path) -> None:
    os.environ.update(
        {
            "DATABASE_URL": DATABASE_URL,
            "CRUCIBLE_VAR_DIR": str(tmp / "var-trainer"),
            "REDIS_URL": REDIS_URL,
            "CRUCIBLE_INSTANCE": "crucible-bench-grpo-fleet",
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
            "CRUCIBLE_STORAGE_URL": str(tmp / "objects"),
            "HF_HUB_OFFLINE": "1",
        }
    )
    _fresh_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from tasks.services import import_task_dirs

    import_task_dirs(REPO / "demo" / "tasks", "demo", "train")


def _workers(tmp: Path) -> list[subprocess.Popen[bytes]]:
    import redis
    from celery import current_app

    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    client.close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", "rollouts,rewards", "--pool", "solo"]
            + ["-n", f"grpo-fleet-{index}@%h", "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
            cwd=REPO,
            env={**os.environ, "CRUCIBLE_VAR_DIR": str(tmp / f"var-worker-{index}")},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for index in range(WORKERS)
    ]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        replies = current_app.control.ping(timeout=1.0) or []
        if sum(1 for reply in replies for name in reply if name.startswith("grpo-fleet-")) >= WORKERS:
            return procs
    raise RuntimeError(f"{WORKERS} workers did not answer within 120 s")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _cpu_ticks() -> tuple[int, int]:
    """Busy and total CPU ticks of the whole machine (/proc/stat): every process, PostgreSQL and Redis included."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


class CpuSampler(threading.Thread):
    """/proc/stat every half second, so the cores kept busy between two moments can be read afterwards."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, int, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((time.monotonic(), *_cpu_ticks()))
            self.done.wait(0.5)

    def busy_cores(self, start: float, end: float) -> float:
        first = min(self.samples, key=lambda s: abs(s[0] - start))
        last = min(self.samples, key=lambda s: abs(s[0] - end))
        return (os.cpu_count() or 1) * (last[1] - first[1]) / max(1, last[2] - first[2])


def _read(stream: IO[bytes], into: list[tuple[float, str]]) -> None:
    for raw in stream:
        into.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))


def _train(run_dir: Path, model: Path, episodes: str, max_staleness: int = 0) -> dict[str, Any]:
    from tests.training.trainer_support import grpo_rows, run_config, write_jsonl

    data = write_jsonl(run_dir.parent / f"{episodes}-prompts.jsonl", grpo_rows(("task_0001",)) * 2)
    run_config(
        run_dir,
        "grpo",
        model,
        data,
        {
            "num_generations": 4,
            "batch_size": BATCH,
            "max_steps": STEPS,
            "max_new_tokens": 48,
            "max_staleness": max_staleness,
        },
        environment={"mode": "agent", "episodes": episodes, "max_steps": 2},
        logging={"save_every_steps": STEPS},
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "training.trainers", str(run_dir)],
        cwd=REPO,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false", "ACCELERATE_USE_CPU": "true"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out: list[tuple[float, str]] = []
    err: list[tuple[float, str]] = []
    sampler = CpuSampler()
    sampler.start()
    readers = [threading.Thread(target=_read, args=(s, into)) for s, into in ((proc.stdout, out), (proc.stderr, err))]
    for reader in readers:
        reader.start()
    code = proc.wait(timeout=3600)
    for reader in readers:
        reader.join()
    sampler.done.set()
    if code != 0:
        raise RuntimeError(f"the {episodes} run failed ({code}):\n" + "\n".join(t for _, t in err[-30:]))
    start = next(at for at, text in err if text.startswith("grpo ("))
    events = [(at, json.loads(text)) for at, text in out if text.startswith("{")]
    metrics = [(at, e) for at, e in events if e.get("event") == "metric" and "reward_mean" in e.get("values", {})]
    rollouts = [e for _, e in events if e.get("event") == "rollout"]
    wall = metrics[-1][0] - start
    rewards = [r["reward"] for r in rollouts if r.get("reward") is not None]
    return {
        "episodes": len(rollouts),
        "steps": len(metrics),
        "training_wall_s": round(wall, 1),
        # The machine's cores the training kept busy on average (trainer, workers, sandboxes, databases).
        "busy_cores": round(sampler.busy_cores(start, metrics[-1][0]), 2),
        "episodes_per_minute": round(len(rollouts) / wall * 60, 2) if wall > 0 else 0.0,
        "reward_mean": round(sum(rewards) / len(rewards), 3) if rewards else None,
        "staleness_max": max((e["values"].get("staleness_max", 0.0) for _, e in metrics), default=None),
    }


def run() -> dict[str, Any]:
    from tests.training.trainer_support import make_mixed_policy

    with tempfile.TemporaryDirectory(prefix="crucible-bench-grpo-fleet-") as tmp_name:
        tmp = Path(tmp_name)
        _setup(tmp)
        model = make_mixed_policy(tmp / "mixed-policy")
        inside = _train(tmp / "trainer-run", model, "trainer")
        procs = _workers(tmp)
        try:
            fleet = _train(tmp / "fleet-run", model, "fleet")
            ahead = _train(tmp / "fleet-ahead-run", model, "fleet", max_staleness=1)
        finally:
            _stop(procs)
    ratio = ahead["episodes_per_minute"] / inside["episodes_per_minute"] if inside["episodes_per_minute"] else 0.0
    return {
        "cores": os.cpu_count(),
        "steps": STEPS,
        "episodes_per_step": BATCH,
        "trainer": inside,
        "fleet": fleet,  # rl.max_staleness 0: each step waits for its own episodes
        "fleet_ahead": ahead,  # rl.max_staleness 1: the next step's episodes run while this one trains
        "speedup": round(ratio, 2),
        "speedup_in_step": round(fleet["episodes_per_minute"] / inside["episodes_per_minute"], 2)
        if inside["episodes_per_minute"]
        else 0.0,
        "checks": [
            check(
                f"grpo agent episodes, {WORKERS} rollout workers (one step ahead) vs in the trainer",
                ratio,
                TARGET,
                better="higher",
                unit="x",
                floor="the same run with its episodes in the trainer's process, same bench",
            )
        ],
        "met": ratio >= TARGET,
        # The most any fleet could gain here: the machine's cores over those the in-trainer run already keeps busy.
        "ceiling_from_cpu": round((os.cpu_count() or 1) / inside["busy_cores"], 2) if inside["busy_cores"] else None,
    }
