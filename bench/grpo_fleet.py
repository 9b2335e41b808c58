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

Each run goes through the launcher, as a training worker runs it. Throughput is episodes per minute
in the steady state: the median time between the steps' logged metrics, so the first step's start-up
(loading the model, building the trainer, the one-ahead mode's double start) costs no side. Runs on a private
PostgreSQL database (BENCH_DATABASE_URL, dropped and made afresh) and Redis database 13.
"""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.checks import check
from bench.workers import cpu_ticks, fresh_database, start_workers, stop

REPO = Path(__file__).resolve().parent.parent
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crucible_bench_grpo_fleet")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
STEPS = int(os.environ.get("BENCH_GRPO_FLEET_STEPS", "4"))
BATCH = int(os.environ.get("BENCH_GRPO_FLEET_BATCH", "4"))  # one group of 4 a step: the data is one task
WORKERS = 2
TARGET = 1.6


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
    fresh_database(DATABASE_URL)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from tasks.services import import_task_dirs

    import_task_dirs(REPO / "demo" / "tasks", "demo", "train")


def _workers(tmp: Path) -> list[subprocess.Popen[bytes]]:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    client.close()
    return start_workers(WORKERS, tmp, "rollouts,rewards", "grpo-fleet")


class CpuSampler(threading.Thread):
    """/proc/stat every half second, so the cores kept busy between two moments can be read afterwards."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, int, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((time.monotonic(), *cpu_ticks()))
            self.done.wait(0.5)

    def busy_cores(self, start: float, end: float) -> float:
        first = min(self.samples, key=lambda s: abs(s[0] - start))
        last = min(self.samples, key=lambda s: abs(s[0] - end))
        return (os.cpu_count() or 1) * (last[1] - first[1]) / max(1, last[2] - first[2])


def _training_set() -> None:
    from tests.training.helpers import record_score
    from training.curation import CurationRule, build_training_set
    from trajectories.models import Trajectory
    from trajectories.services import import_trajectories

    import_trajectories(REPO / "demo" / "trajectories.jsonl")
    for trajectory in Trajectory.objects.filter(task__task_id="task_0001")[:2]:
        record_score(trajectory, 1.0, True)
    build_training_set("grpo-fleet-bench", CurationRule())


def _train(model: Path, episodes: str, max_staleness: int = 0) -> dict[str, Any]:
    """One run through the launcher, as a training worker runs it; throughput from its steps' log times."""
    from training.launcher import execute
    from training.services import create_run

    raw = {
        "kind": "grpo",
        "name": f"grpo-fleet-bench-{episodes}-{max_staleness}",
        "model": {"base_model": str(model)},
        "rl": {
            "max_steps": STEPS,
            "batch_size": BATCH,
            "num_generations": 4,
            "learning_rate": 1e-3,
            "max_new_tokens": 48,
            "max_staleness": max_staleness,
        },
        "data": {"training_set": "grpo-fleet-bench"},
        "environment": {"mode": "agent", "episodes": episodes, "max_steps": 2},
        "logging": {"save_every_steps": STEPS},
    }
    run = create_run(raw, enqueue=False)
    sampler = CpuSampler()
    sampler.start()
    finished = execute(run.pk)
    sampler.done.set()
    if finished is None or finished.status != "succeeded":
        raise RuntimeError(f"the {episodes} run did not succeed: {finished and finished.log_tail[-2000:]}")
    logged = [m.logged_at.timestamp() for m in finished.metric_rows.filter(values__has_key="reward_mean")]
    # Steady state: the time between steps' logs (the first step also loads the model and builds the trainer).
    gaps = [b - a for a, b in itertools.pairwise(logged)]
    per_step = statistics.median(gaps) if gaps else 0.0
    offset = time.monotonic() - time.time()  # the sampler's clock from the wall clock
    return {
        "episodes": BATCH * len(logged),
        "steps": len(logged),
        "step_s_median": round(per_step, 1),
        "episodes_per_minute": round(BATCH / per_step * 60, 2) if per_step else 0.0,
        # The machine's cores the steady steps kept busy (trainer, workers, sandboxes, databases).
        "busy_cores": round(sampler.busy_cores(logged[0] + offset, logged[-1] + offset), 2) if gaps else None,
    }


def run() -> dict[str, Any]:
    from tests.training.trainer_support import make_mixed_policy

    with tempfile.TemporaryDirectory(prefix="crucible-bench-grpo-fleet-") as tmp_name:
        tmp = Path(tmp_name)
        _setup(tmp)
        _training_set()
        model = make_mixed_policy(tmp / "mixed-policy")
        inside = _train(model, "trainer")
        procs = _workers(tmp)
        try:
            fleet = _train(model, "fleet")
            ahead = _train(model, "fleet", max_staleness=1)
        finally:
            stop(procs)
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
