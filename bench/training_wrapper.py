"""Crucible's training wrapper vs the same TRL call made directly (target: <= 1.1x wall time).

Wrapper: `python manage.py train --config FILE --wait --json` — config check, run directory,
the launcher (`accelerate launch -m training.trainers`), events into the database, checkpoint
rows. Direct: a plain script that makes the same SFTTrainer call (same data file, same
arguments, same saves) with no launcher, no accelerate, no events. Both run as fresh processes
on the same train file; sizes via BENCH_TRAINING_STEPS / BENCH_TRAINING_MAX_LENGTH / _REPEATS.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.checks import check

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "var" / "models" / "smollm2-135m-instruct"
# A CPU step at 1024 tokens takes ~1 minute on a busy 2-core machine; the fixed costs (process
# start, imports, model load) are what the ratio is about, so a few steps show them. GPU hosts
# can afford BENCH_TRAINING_STEPS=50 for a steadier figure.
STEPS = int(os.environ.get("BENCH_TRAINING_STEPS", "5"))
MAX_LENGTH = int(os.environ.get("BENCH_TRAINING_MAX_LENGTH", "1024"))
REPEATS = int(os.environ.get("BENCH_TRAINING_REPEATS", "1"))
TARGET = 1.1


def _train_file(path: Path) -> int:
    """The demo's successful trajectories as SFT rows (the chat the hf policy has)."""
    from trajectories.conversation import TOOLS, RecordedStep, conversation

    rows = 0
    with path.open("w") as out:
        for line in (REPO / "demo" / "trajectories.jsonl").read_text().splitlines():
            record = json.loads(line)
            if not record.get("success"):
                continue
            steps = [
                RecordedStep(
                    s["action_type"], s.get("action_input"), s.get("thought") or "", s.get("observation") or ""
                )
                for s in record["steps"]
            ]
            out.write(json.dumps({"messages": conversation(record["prompt"], steps), "tools": TOOLS}) + "\n")
            rows += 1
    return rows


def _config(train_file: Path) -> dict[str, Any]:
    return {
        "kind": "sft",
        "model": {"base_model": str(MODEL)},
        "rl": {"max_steps": STEPS, "batch_size": 2, "learning_rate": "1e-5", "max_length": MAX_LENGTH},
        "data": {"train_file": str(train_file)},
        "logging": {"save_every_steps": STEPS},
    }


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)  # noqa: S603
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
    return wall, done.stdout


def run() -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="crucible-bench-training-"))
    try:
        return _measure(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _measure(tmp: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
        "CRUCIBLE_VAR_DIR": str(tmp / "var"),
        "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
        "CRUCIBLE_INSTANCE": "crucible-bench",
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("CRUCIBLE_TRAINER_MODULE", None)
    env.pop("CRUCIBLE_TRAINING_LAUNCHER", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True)  # noqa: S603
    train_file = tmp / "train.jsonl"
    rows = _train_file(train_file)
    config_path = tmp / "rl_config.json"
    config_path.write_text(json.dumps(_config(train_file)))
    direct_dir = tmp / "direct"
    direct_dir.mkdir()
    direct_config = {**_config(train_file), "output_dir": str(direct_dir / "output")}
    direct_config["model"]["base_model"] = str(MODEL.resolve())
    (direct_dir / "config.json").write_text(json.dumps(direct_config))

    wrapper_s, direct_s = [], []
    for _ in range(REPEATS):
        # Alternated, so that a busy moment on a shared machine does not land on one side only.
        wall, _ = _timed([sys.executable, "-m", "bench._training_direct", str(direct_dir)], env)
        direct_s.append(wall)
        wall, out = _timed(
            [sys.executable, "manage.py", "train", "--config", str(config_path), "--wait", "--json"], env
        )
        wrapper_s.append(wall)
        result = json.loads(out.strip().splitlines()[-1])
        assert result["status"] == "succeeded", result
    ratio = statistics.median(wrapper_s) / statistics.median(direct_s)
    return {
        "rows": rows,
        "steps": STEPS,
        "max_length": MAX_LENGTH,
        "repeats": REPEATS,
        "wrapper_s": [round(s, 2) for s in wrapper_s],
        "direct_s": [round(s, 2) for s in direct_s],
        "checks": [
            check(
                "train command vs the same TRL call made directly",
                ratio,
                TARGET,
                better="lower",
                unit="x",
                floor="the same SFT run by TRL directly, same run",
            )
        ],
        "summary": {"ratio": round(ratio, 3), "target": TARGET, "ok": ratio <= TARGET},
    }
