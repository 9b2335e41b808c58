"""The learning check (issue 13): does SFT on the oracle's verified trajectories teach the bundled
model the tool-call format, and does its train-split pass@1 go up?

1. The scripted oracle solves each train task through the real agent loop; each episode's patch
   is scored by the plain-Python scorer and only resolved ones are kept (rejection sampling).
2. `hf` rollouts of the base model on the same tasks: share of steps with a well-formed tool call
   (action_type != "invalid") and pass@1 (one greedy sample per task, scored).
3. `python -m training.trainers RUN_DIR` (the launcher's command) fine-tunes the base model.
4. The same rollouts with the checkpoint.
Targets: well-formed share >= 80 % after SFT, pass@1 above the base model's. Everything runs
without a database. Sizes via environment (BENCH_LEARNING_TASKS, _STEPS, _ROLLOUT_STEPS, ...)
because a 2-core machine cannot afford the whole suite; the figures say what was run.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.checks import check

if TYPE_CHECKING:
    from trajectories.schema import AgentStep

REPO = Path(__file__).resolve().parent.parent
TASKS_DIR = REPO / "demo" / "tasks"
MODEL = REPO / "var" / "models" / "smollm2-135m-instruct"
# One task of each demo library by default: a 2-core machine runs the 135M model at ~10 tokens/s.
DEFAULT_TASKS = "task_0001,task_0008,task_0013"


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, str(default)))


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class _Steps:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def step(self, record: AgentStep) -> None:
        self.records.append(dict(record))


def _agent_task(task_dir: Path, max_steps: int) -> Any:
    from tasks.spec import TaskSpec
    from trajectories.agent import AgentTask

    # A CPU model's steps are slow: twice the rollouts' episode budget.
    return AgentTask.of(TaskSpec.from_task_dir(task_dir), max_steps, episode_timeouts=10)


def _progress(message: str) -> None:
    print(f"learning: {message}", file=sys.stderr, flush=True)


def _episode(task_dir: Path, policy: Any, max_steps: int) -> dict[str, Any]:
    from rewards.scoring import score_patch
    from rewards.spec import load_spec
    from tasks.spec import TaskSpec
    from trajectories.agent import run_episode

    task = _agent_task(task_dir, max_steps)
    steps = _Steps()
    episode = run_episode(task, policy, steps)
    score = score_patch(TaskSpec.from_task_dir(task_dir), episode.patch, load_spec(), termination=episode.termination)
    _progress(f"{task.task_id}: {[r['action_type'] for r in steps.records]} reward {score.reward}")
    return {
        "task_id": task.task_id,
        "statement": task.statement,
        "steps": steps.records,
        "termination": str(episode.termination),
        "reward": score.reward,
        "resolved": score.resolved,
    }


def _oracle(task_dirs: list[Path]) -> list[dict[str, Any]]:
    from trajectories.policies.scripted import ScriptedPolicy

    out = []
    for task_dir in task_dirs:
        policy = ScriptedPolicy(task_dir / "repo_snapshot", (task_dir / "expected_patch").read_text())
        out.append(_episode(task_dir, policy, 30))
    return out


def _sft_file(episodes: list[dict[str, Any]], path: Path) -> int:
    from trajectories.conversation import TOOLS, RecordedStep, conversation

    kept = 0
    with path.open("w") as handle:
        for episode in episodes:
            if not episode["resolved"]:
                continue  # rejection sampling: only verified successes are imitated
            steps = [
                RecordedStep(s["action_type"], s["action_input"], s.get("thought", ""), s.get("observation", ""))
                for s in episode["steps"]
            ]
            handle.write(json.dumps({"messages": conversation(episode["statement"], steps), "tools": TOOLS}) + "\n")
            kept += 1
    return kept


def _hf_rollouts(model: Path, task_dirs: list[Path], max_steps: int, max_new_tokens: int) -> dict[str, Any]:
    from trajectories.policies.hf import HFPolicy

    # float32, as the model was trained: bfloat16 rounding may flip a near-tie in a long memorised call.
    dtype = os.environ.get("BENCH_LEARNING_DTYPE", "float32")
    policy = HFPolicy(str(model), temperature=0.0, seed=0, max_new_tokens=max_new_tokens, dtype=dtype)
    started = time.monotonic()
    try:
        episodes = [_episode(task_dir, policy, max_steps) for task_dir in task_dirs]
    finally:
        policy.close()
    steps = [s for e in episodes for s in e["steps"]]
    well_formed = sum(s["action_type"] != "invalid" for s in steps)
    resolved = sum(e["resolved"] for e in episodes)
    return {
        "model": str(model),
        "episodes": len(episodes),
        "steps": len(steps),
        "well_formed_steps": well_formed,
        "well_formed_share": round(well_formed / len(steps), 4) if steps else 0.0,
        "pass_at_1": round(resolved / len(episodes), 4) if episodes else 0.0,
        "mean_reward": round(sum(e["reward"] for e in episodes) / len(episodes), 4) if episodes else 0.0,
        "actions": [[s["action_type"] for s in e["steps"]] for e in episodes],
        # What the model wrote instead of a call (the first per episode), to see why it failed.
        "invalid_replies": [
            next((str(s["action_input"])[:300] for s in e["steps"] if s["action_type"] == "invalid"), None)
            for e in episodes
        ],
        "wall_s": round(time.monotonic() - started, 1),
    }


def _train(run_dir: Path, config: dict[str, Any]) -> dict[str, Any]:
    (run_dir / "config.json").write_text(json.dumps(config))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "training.trainers", str(run_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    events = []
    for line in done.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    checkpoints = [e for e in events if e.get("event") == "checkpoint"]
    if done.returncode != 0 or not checkpoints:
        raise RuntimeError(f"the SFT run failed ({done.returncode}): {done.stderr[-2000:]}")
    losses = [e["values"]["loss"] for e in events if e.get("event") == "metric" and "loss" in e["values"]]
    return {
        "checkpoint": checkpoints[-1]["path"],
        "wall_s": round(time.monotonic() - started, 1),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "steps": len(losses),
    }


def run() -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = os.environ.get("BENCH_LEARNING_TASKS", DEFAULT_TASKS).split(",")
    task_dirs = [TASKS_DIR / name.strip() for name in names if name.strip()]
    sft_steps = _env_int("BENCH_LEARNING_STEPS", 30)
    # The oracle's episodes are 4-5 steps; an edit_file call is up to ~600 tokens of JSON.
    rollout_steps = _env_int("BENCH_LEARNING_ROLLOUT_STEPS", 5)
    new_tokens = _env_int("BENCH_LEARNING_NEW_TOKENS", 768)
    # The whole oracle conversations are 1.9k-2.8k tokens: all of each is learned.
    max_length = _env_int("BENCH_LEARNING_MAX_LENGTH", 3072)
    learning_rate = float(os.environ.get("BENCH_LEARNING_LR", "2e-4"))
    cpu_start, wall_start = _cpu_s(), time.monotonic()
    phases: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="crucible-learning-") as tmp:
        tmp_path = Path(tmp)
        oracle = _oracle(task_dirs)
        train_file = tmp_path / "sft.jsonl"
        kept = _sft_file(oracle, train_file)
        phases["oracle_cpu_s"] = round(_cpu_s() - cpu_start, 1)
        before = _hf_rollouts(MODEL, task_dirs, rollout_steps, new_tokens)
        phases["base_rollouts_cpu_s"] = round(_cpu_s() - cpu_start - phases["oracle_cpu_s"], 1)
        mark = _cpu_s()
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        training = _train(
            run_dir,
            {
                "kind": "sft",
                "model": {"base_model": str(MODEL)},
                "rl": {
                    "max_steps": sft_steps,
                    "batch_size": 1,
                    "learning_rate": learning_rate,
                    "max_length": max_length,
                },
                "data": {"train_file": str(train_file)},
                "logging": {"save_every_steps": 0},
                "output_dir": str(run_dir / "out"),
            },
        )
        phases["sft_cpu_s"] = round(_cpu_s() - mark, 1)
        mark = _cpu_s()
        after = _hf_rollouts(Path(training["checkpoint"]), task_dirs, rollout_steps, new_tokens)
        phases["sft_rollouts_cpu_s"] = round(_cpu_s() - mark, 1)
    cpu_total = round(_cpu_s() - cpu_start, 1)
    passed = after["well_formed_share"] >= 0.8 and after["pass_at_1"] > before["pass_at_1"]
    return {
        "tasks": [d.name for d in task_dirs],
        "oracle": {
            "episodes": len(oracle),
            "resolved": kept,
            "steps": sum(len(e["steps"]) for e in oracle),
        },
        "settings": {
            "sft_steps": sft_steps,
            "learning_rate": learning_rate,
            "max_length": max_length,
            "rollout_max_steps": rollout_steps,
            "max_new_tokens": new_tokens,
            "temperature": 0.0,
        },
        "base": before,
        "sft": training,
        "after_sft": after,
        "cpu_s": cpu_total,
        "cpu_s_by_phase": phases,
        "checks": [check("well-formed tool calls after SFT", after["well_formed_share"], 0.8, better="higher")],
        "summary": {
            "well_formed_base": before["well_formed_share"],
            "well_formed_after": after["well_formed_share"],
            "pass_at_1_base": before["pass_at_1"],
            "pass_at_1_after": after["pass_at_1"],
            "target_well_formed": 0.8,
            "met": passed,
            "cpu_s": cpu_total,
            "wall_s": round(time.monotonic() - wall_start, 1),
        },
    }
