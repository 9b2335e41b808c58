"""Synthetic trajectory JSONL of a chosen size, for benchmarks and load tests."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import orjson

from core.vocabulary import ActionType, BackendName, PolicyKind, Termination, TrajectorySource

ACTIONS = [ActionType.READ_FILE, ActionType.EDIT_FILE, ActionType.RUN_COMMAND, ActionType.SEARCH, ActionType.RUN_TESTS]


def write_jsonl(
    path: Path,
    trajectories: int,
    steps_per_trajectory: int,
    observation_bytes: int = 200,
    seed: int = 0,
    task_ids: list[str] | None = None,
) -> int:
    """Write the file and return the number of steps in it."""
    rng = random.Random(seed)
    tasks = task_ids or [f"bench_task_{i:03d}" for i in range(50)]
    filler = "x" * observation_bytes
    total = 0
    with path.open("wb") as fh:
        for i in range(trajectories):
            steps = []
            for n in range(1, steps_per_trajectory + 1):
                action = ACTIONS[(i + n) % len(ACTIONS)]
                steps.append(
                    {
                        "step": n,
                        "action_type": action,
                        "action_input": {"file": "src/config.py", "patch": "@@ -1 +1 @@"}
                        if action == ActionType.EDIT_FILE
                        else f"pytest -q tests/test_{n}.py",
                        "observation": f"{n} passed, {rng.randint(0, 5)} failed\n{filler}",
                        "thought": f"step {n}: look at the failing test",
                        "reward": round(rng.uniform(-0.2, 0.2), 3),
                        "timestamp": f"2025-06-01T10:{n // 60 % 60:02d}:{n % 60:02d}Z",
                        "duration_ms": 12.5,
                        "exit_code": rng.choice([0, 1]),
                    }
                )
            total += len(steps)
            success = rng.random() < 0.4
            record = {
                "schema_version": 1,
                "trajectory_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "task_id": tasks[i % len(tasks)],
                "base_commit": "a1b2c3d",
                "prompt": "Fix the bug.",
                "policy": {"kind": PolicyKind.SCRIPTED, "model": "bench", "temperature": 0.8, "seed": i},
                "sandbox": {"backend": BackendName.BWRAP, "startup_ms": 11.0},
                "steps": steps,
                "patch": "diff --git a/x b/x\n",
                "final_reward": 1.0 if success else 0.0,
                "success": success,
                "termination": Termination.SUBMITTED if success else Termination.MAX_STEPS,
                "flags": [],
                "source": TrajectorySource.OFFLINE,
                "created_at": f"2025-06-{1 + i % 28:02d}T12:00:00Z",
            }
            fh.write(orjson.dumps(record) + b"\n")
    return total
