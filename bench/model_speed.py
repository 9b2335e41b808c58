"""The bundled model as a policy: generation speed here, and an hf rollout of 5 steps on one demo task.

Speed: greedy, NEW_TOKENS new tokens (forced: no early stop), after a warm-up, median of 3, for
the settings the hf policy uses (float32, trajectories.policies.hf.torch_threads()) and a few
alternatives (threads, bfloat16, a static KV cache) on a short chat (decode speed); the policy's
settings also on the agent's real first prompt with the tool schemas (~1k tokens, prefill
included: what a step costs). Target (issue 18): >= 20 tokens/s decode on an idle machine.
Rollout: one hf trajectory of at most 5 steps on task_0001 (a private SQLite database), wall time
and the per-step model figures the batch page shows.

Runs in a child process (its own Django settings and torch threads): python -m bench model_speed.
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

REPO = Path(__file__).resolve().parent.parent
NEW_TOKENS = 64
ROLLOUT_STEPS = 5
TARGET_TOKENS_PER_S = 20.0
WARM_UP_LIMIT_S = 20.0


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-model-") as tmp:
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{Path(tmp) / 'bench.sqlite3'}",
            "CRUCIBLE_VAR_DIR": str(Path(tmp) / "var"),
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
            "HF_HUB_OFFLINE": "1",
        }
        # The child's stderr (its progress, a failure's traceback) goes straight to the console.
        done = subprocess.run(
            [sys.executable, "-m", "bench.model_speed"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            timeout=3600,
        )
    if done.returncode != 0:
        raise RuntimeError(f"model_speed child failed with exit code {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _speed(model_path: str) -> dict[str, Any]:
    import torch

    from trajectories.agent import SYSTEM_PROMPT
    from trajectories.policies.hf import _pick_dtype, loaded_model, torch_threads
    from trajectories.tools import TOOLS

    statement = (REPO / "demo" / "tasks" / "task_0001" / "task.md").read_text()
    chats = {
        "short": ([{"role": "user", "content": "Write a Python function that reverses a string."}], None),
        "agent_first_step": (
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": statement}],
            TOOLS,
        ),
    }
    policy_threads = torch_threads()
    cores = len(os.sched_getaffinity(0))
    default = str(_pick_dtype("auto", "cpu")).removeprefix("torch.")  # what the hf policy uses here
    other = "float32" if default == "bfloat16" else "bfloat16"
    variants: list[dict[str, Any]] = [{"threads": policy_threads, "dtype": default, "cache": "dynamic"}]
    for threads in sorted({1, 2, min(4, cores)} - {policy_threads}):
        variants.append({"threads": threads, "dtype": default, "cache": "dynamic"})
    variants.append({"threads": policy_threads, "dtype": default, "cache": "static"})
    variants.append({"threads": policy_threads, "dtype": other, "cache": "dynamic"})
    rows = []
    for variant in variants:
        loaded = loaded_model(model_path, _pick_dtype(str(variant["dtype"]), "cpu"), "cpu")
        torch.set_num_threads(int(variant["threads"]))  # after the load, which sets the policy's own
        row: dict[str, Any] = dict(variant)
        # The alternatives only on the short chat: a bench on a shared machine must stay short.
        for name, (chat, tools) in list(chats.items())[: 2 if variant is variants[0] else 1]:
            enc = loaded.tokenizer.apply_chat_template(
                chat, tools=tools, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )

            def generate(n: int, enc: Any = enc, loaded: Any = loaded, cache: Any = variant["cache"]) -> float:
                return _generate(loaded, enc, n, static=cache == "static")

            warm = generate(8)
            if warm > WARM_UP_LIMIT_S:
                # bfloat16 without native kernels can be tens of times slower; say so, do not wait it out.
                row[name] = {"skipped": f"{warm:.1f} s for an 8-token warm-up"}
                continue
            prefill = statistics.median(generate(1) for _ in range(3))
            total = statistics.median(generate(NEW_TOKENS) for _ in range(3))
            row[name] = {
                "prompt_tokens": int(enc["input_ids"].shape[1]),
                "prefill_ms": round(prefill * 1000, 1),
                "generate_s": round(total, 3),
                "tokens_per_s": round(NEW_TOKENS / total, 2),
                "decode_tokens_per_s": round((NEW_TOKENS - 1) / max(total - prefill, 1e-9), 2),
            }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)  # progress, should the bench be cut short
    torch.set_num_threads(policy_threads)
    return {
        "cores": cores,
        "policy_threads": policy_threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "new_tokens": NEW_TOKENS,
        "variants": rows,
    }


def _generate(loaded: Any, enc: Any, n: int, *, static: bool) -> float:
    """Seconds to generate exactly `n` tokens, greedy."""
    import torch
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=n,
        min_new_tokens=n,
        do_sample=False,
        eos_token_id=loaded.eos_ids,
        pad_token_id=loaded.pad_id,
        cache_implementation="static" if static else None,
    )
    started = time.perf_counter()
    with torch.inference_mode():
        loaded.model.generate(**enc, generation_config=config)
    return time.perf_counter() - started


def _rollout(model_path: str) -> dict[str, Any]:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from tasks.models import TaskSuite
    from tasks.services import import_task_dirs
    from trajectories.batches import start_batch
    from trajectories.rollout_settings import RolloutSettings
    from trajectories.runner import run_trajectory

    import_task_dirs(REPO / "demo" / "tasks" / "task_0001", "bench-model")
    batch = start_batch(
        TaskSuite.objects.get(name="bench-model"),
        RolloutSettings("hf", model_path, max_steps=ROLLOUT_STEPS, temperature=0.0, max_new_tokens=128),
        enqueue=False,
    )
    started = time.perf_counter()
    trajectory = run_trajectory(batch.trajectories.get().pk)
    wall = time.perf_counter() - started
    assert trajectory is not None
    calls = [s.extra.get("model") or {} for s in trajectory.steps.order_by("step")]
    return {
        "task": "task_0001",
        "status": trajectory.status,
        "termination": trajectory.termination,
        "error": trajectory.error[:300],
        "steps": trajectory.step_count,
        "wall_s": round(wall, 2),
        "model_s": round(sum(c.get("generate_ms", 0.0) for c in calls) / 1000, 2),
        "sandbox_s": round(float(trajectory.sandbox.get("sandbox_ms", 0.0)) / 1000, 2),
        "per_step": [
            {k: c.get(k) for k in ("prompt_tokens", "completion_tokens", "generate_ms", "tokens_per_s")} for c in calls
        ],
    }


def _child() -> None:
    sys.path.insert(0, str(REPO))
    from django.conf import settings

    # Before anything loads torch: the policy's module sets up torch's OpenMP (OMP_WAIT_POLICY).
    import trajectories.policies.hf  # noqa: F401

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    model_path = str(settings.CRUCIBLE_DEFAULT_MODEL)
    load_avg = os.getloadavg()[0]
    speed = _speed(model_path)
    rollout = _rollout(model_path)
    chosen = speed["variants"][0]
    best = max(v["short"].get("decode_tokens_per_s", 0.0) for v in speed["variants"])
    result = {
        "model": model_path,
        "load_average_at_start": round(load_avg, 2),
        "speed": speed,
        "rollout": rollout,
        "summary": {
            "tokens_per_s": chosen["short"]["decode_tokens_per_s"],
            "agent_step_tokens_per_s": chosen["agent_first_step"]["tokens_per_s"],
            "best_variant_tokens_per_s": best,
            "target_tokens_per_s": TARGET_TOKENS_PER_S,
            "rollout_steps": rollout["steps"],
            "rollout_wall_s": rollout["wall_s"],
            "load_average": round(load_avg, 2),
        },
    }
    print(json.dumps(result))


if __name__ == "__main__":
    _child()
