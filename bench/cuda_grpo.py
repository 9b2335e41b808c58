"""GRPO on a GPU: Crucible's own trainer (`python -m training.trainers RUN_DIR`, single-turn, the
verified reward scored in the sandbox) run on CUDA, and what it got out of the card.

    python -m bench.cuda_grpo --out DIR [--size bundled|1.7b] [--steps N] ...

The figures come from the trainer's own metric events (tokens_per_s, steps_per_min,
system_gpu_util_percent, system_gpu_memory_mb), taken over the steps after the first (the
first holds CUDA's start and the task's first calibration), and from an `nvidia-smi` reading
every 0.5 s beside the run. The weights are the bundled model's when it is there (`--model`);
otherwise a seeded random initialisation of its architecture (or of a larger one, `--size`),
which generates to the token budget every time: the throughput of the longest completions, and
rewards that are all equal (the run says so: zero reward variance).

`make bench` runs it only where CUDA is (`cuda_grpo`); elsewhere it records why not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO_TASKS = ROOT / "demo" / "tasks"
BUNDLED = ROOT / "var" / "models" / "smollm2-135m-instruct"
# SmolLM2-1.7B's shape on the bundled model's vocabulary: big enough for the card to matter.
SIZES: dict[str, dict[str, int]] = {
    "bundled": {},
    "1.7b": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 64,
    },
}


def build_model(dest: Path, source: Path, size: str, seed: int = 0) -> Path:
    """A seeded random initialisation of `source`'s architecture (resized by `size`), with its tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(source)
    config.update(SIZES[size])
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config).save_pretrained(dest)
    AutoTokenizer.from_pretrained(source).save_pretrained(dest)
    for name in ("chat_template.jinja", "generation_config.json"):
        if (source / name).is_file() and not (dest / name).is_file():
            shutil.copy(source / name, dest / name)
    return dest


def write_run(run_dir: Path, model: Path, args: argparse.Namespace) -> Path:
    tasks = sorted(p for p in DEMO_TASKS.iterdir() if (p / "task.md").is_file())[: args.tasks]
    rows = [
        {
            "prompt": [{"role": "user", "content": (task / "task.md").read_text(encoding="utf-8")}],
            "task_id": task.name,
            "task_dir": str(task),
        }
        for task in tasks
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    train = run_dir / "prompts.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = {
        "kind": "grpo",
        "model": {"base_model": str(model)},
        "rl": {
            "max_steps": args.steps,
            "batch_size": args.batch,
            "num_generations": args.generations,
            "max_new_tokens": args.max_new_tokens,
            "learning_rate": 1e-6,
            "temperature": 1.0,
        },
        "data": {"train_file": str(train)},
        "environment": {"mode": "single_turn", **({"sandbox_type": args.sandbox} if args.sandbox else {})},
        "logging": {"save_every_steps": 0},
        "output_dir": str(run_dir / "out"),
    }
    (run_dir / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return run_dir


def smi_sampler(path: Path) -> subprocess.Popen[bytes] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    query = "timestamp,utilization.gpu,memory.used,power.draw,clocks.sm"
    with path.open("wb") as out:
        return subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-lms", "500"],
            stdout=out,
            stderr=subprocess.DEVNULL,
        )


def summarise(events: list[dict[str, Any]], wall_s: float, smi: Path | None) -> dict[str, Any]:
    metrics = [e for e in events if e.get("event") == "metric"]
    steady = metrics[1:] or metrics  # the first step holds CUDA's start and the first calibration

    def med(key: str) -> float | None:
        values = [m["values"][key] for m in steady if key in m.get("values", {})]
        return round(statistics.median(values), 2) if values else None

    rollouts = [e for e in events if e.get("event") == "rollout"]
    done = next((e for e in events if e.get("event") == "done"), {})
    summary: dict[str, Any] = {
        "status": done.get("status"),
        "error": done.get("error"),
        "steps": len(metrics),
        "rollouts": len(rollouts),
        "wall_s": round(wall_s, 1),
        "steps_per_min_median": med("steps_per_min"),
        "tokens_per_s_median": med("tokens_per_s"),
        "gpu_util_percent_median": med("system_gpu_util_percent"),
        "gpu_memory_mb_peak": max((m["values"].get("system_gpu_memory_mb", 0) for m in metrics), default=None),
        "step_time_s_median": med("step_time"),
        "score_s_median": med("score_s"),
        "completion_length_median": med("completions_mean_length"),
        "reward_mean": med("reward_mean"),
        "reward_std": med("reward_std"),
    }
    if smi is not None and smi.is_file():
        busy = []
        for line in smi.read_text().splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 2 and parts[1].replace(".", "").isdigit():
                busy.append(float(parts[1]))
        if busy:
            summary["smi_util_percent_mean"] = round(statistics.fmean(busy), 1)
            summary["smi_samples"] = len(busy)
    return summary


def train_once(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    work = Path(args.work) / args.size
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    model = Path(args.model) if args.model and args.size == "bundled" else None
    if model is None:
        model = build_model(work / "model", Path(args.config_from), args.size)
    run_dir = write_run(work / "run", model, args)
    smi_path = out / f"smi-{args.size}.csv"
    sampler = smi_sampler(smi_path)
    started = time.monotonic()
    with (
        (out / f"events-{args.size}.jsonl").open("w") as events_out,
        (out / f"trainer-{args.size}.log").open("w") as log,
    ):
        try:
            subprocess.run(
                [sys.executable, "-m", "training.trainers", str(run_dir)],
                cwd=ROOT,
                stdout=events_out,
                stderr=log,
                env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
                timeout=args.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            log.write(f"\nbench: stopped after {args.timeout} s\n")
    wall = time.monotonic() - started
    if sampler is not None:
        sampler.terminate()
        sampler.wait()
    events = []
    for line in (out / f"events-{args.size}.jsonl").read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    summary = {
        "size": args.size,
        "weights": "bundled" if args.model and args.size == "bundled" else "random",
        **summarise(events, wall, smi_path if sampler else None),
    }
    summary["config"] = {k: getattr(args, k) for k in ("steps", "batch", "generations", "max_new_tokens", "tasks")}
    return summary


def run() -> dict[str, Any]:
    """`make bench`'s entry: on a host without CUDA there is nothing to measure, and it says so."""
    try:
        import torch
    except ImportError:
        return {"skipped": "torch is not installed"}
    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device on this host: run `python -m bench.cuda_grpo --out DIR` on a GPU host"}
    out = ROOT / "var" / "bench" / "cuda_grpo"
    out.mkdir(parents=True, exist_ok=True)
    args = parser().parse_args(["--out", str(out), "--model", str(BUNDLED)])
    return train_once(args, out)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.cuda_grpo", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="where the events, logs and summary go")
    p.add_argument("--work", default="/tmp/crucible-cuda-grpo", help="model and run directories")
    p.add_argument("--model", default="", help="trained weights to use for --size bundled (default: random)")
    p.add_argument("--config-from", default=str(BUNDLED), help="a directory with the tokenizer and config.json")
    p.add_argument("--size", choices=sorted(SIZES), default="bundled")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument("--tasks", type=int, default=4, help="demo tasks to draw prompts from")
    p.add_argument("--sandbox", default="", help="sandbox backend for scoring (default: the trainer's)")
    p.add_argument("--timeout", type=float, default=300)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = train_once(args, out)
    (out / f"summary-{args.size}.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1), flush=True)
    return 0 if summary.get("status") == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
