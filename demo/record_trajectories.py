"""Re-record the demo's trajectories (demo/trajectories.jsonl, and demo/lang_trajectories.jsonl for the
Go and JavaScript suites): run every trajectory's actions again and keep what they observe.

Each record's actions (tool-form `action_input`s, the schema of trajectories/tools.py) are run
in order by the real agent loop, with the replay policy, in a fresh sandbox over the task's
`repo_snapshot`; the observations, exit codes, timings, the patch and the termination are
rewritten from that run. Thoughts, provenance, ids and claimed outcomes are kept. So the demo
says only what really happens, and "Replay in a fresh sandbox" reproduces every step
(tests/trajectories/test_demo_replay.py checks it).

Usage (from the repository root): .venv/bin/python demo/record_trajectories.py [--check] [--file F]
`--check` re-runs without writing and exits 1 if any observation would change.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tasks.spec import TaskSpec  # noqa: E402
from trajectories.agent import AgentTask, run_episode  # noqa: E402
from trajectories.policies.replay import ReplayPolicy  # noqa: E402
from trajectories.schema import AgentStep, action_input_error, format_time  # noqa: E402

DEMO = REPO / "demo"
TRAJECTORIES = (DEMO / "trajectories.jsonl", DEMO / "lang_trajectories.jsonl")
TASK_FOLDERS = ("tasks", "go_tasks", "js_tasks")  # the Python, Go and JavaScript suites' task directories
# What differs between two runs of the same action (the same rule as trajectories.replay).
TIMING = re.compile(r"\bin \d+(\.\d+)?s\b|\d+(\.\d+)? ?ms\b|/run/[0-9a-f]{32}")


class Collect:
    def __init__(self) -> None:
        self.records: list[AgentStep] = []

    def step(self, record: AgentStep) -> None:
        self.records.append(record)


def task_for(task_id: str, steps: int) -> AgentTask:
    found = [DEMO / folder / task_id for folder in TASK_FOLDERS if (DEMO / folder / task_id).is_dir()]
    if len(found) != 1:
        raise SystemExit(f"{task_id}: {len(found)} demo task directories of that name (one expected)")
    return AgentTask.of(TaskSpec.from_task_dir(found[0]), steps)


def rerecord(record: dict[str, Any], backend: str) -> dict[str, Any]:
    steps = record["steps"]
    for step in steps:
        problem = action_input_error(step["action_type"], step["action_input"])
        if problem is not None or step["action_type"] == "invalid":
            raise SystemExit(f"{record['trajectory_id']} step {step['step']}: action_input{problem or ' is invalid'}")
    collected = Collect()
    episode = run_episode(
        task_for(record["task_id"], len(steps)), ReplayPolicy(steps, record["trajectory_id"]), collected, backend
    )
    if episode.error:
        raise SystemExit(f"{record['trajectory_id']}: the run failed: {episode.error}")
    started = datetime.fromisoformat(record["created_at"].replace("Z", "+00:00")).astimezone(UTC)
    elapsed = 0.0
    out_steps = []
    for old, new in zip(steps, collected.records, strict=True):
        # Wall-clock stamps of a demo would change at every re-recording; steps are laid out
        # from the record's start by their real durations instead.
        elapsed += (new["duration_ms"] or 0.0) + 1500.0
        out_steps.append(
            {
                "step": new["step"],
                "action_type": new["action_type"],
                "action_input": new["action_input"],
                "observation": new["observation"],
                "observation_truncated": new["observation_truncated"],
                "thought": old.get("thought", ""),
                "reward": old.get("reward"),
                "reward_breakdown": old.get("reward_breakdown") or {},
                "timestamp": format_time(started + timedelta(milliseconds=elapsed)),
                "duration_ms": new["duration_ms"],
                "exit_code": new["exit_code"],
            }
        )
    return {
        **record,
        "steps": out_steps,
        "patch": episode.patch,
        "termination": str(episode.termination),
        "sandbox": {"backend": episode.sandbox["backend"], "startup_ms": round(episode.sandbox["startup_ms"], 1)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a re-run would change an observation")
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--file", type=Path, action="append", help="a demo JSONL file (default: both)")
    args = parser.parse_args()
    failed = [rerecord_file(path, args.backend, args.check) for path in args.file or TRAJECTORIES]
    return 1 if any(failed) else 0


def rerecord_file(path: Path, backend: str, check: bool) -> bool:
    """Re-record one file (or, with `check`, only compare); True when `check` found a change."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    fresh = [rerecord(r, backend) for r in records]
    changed = [
        f"{new['trajectory_id']} step {b['step']}"
        for old, new in zip(records, fresh, strict=True)
        for a, b in zip(old["steps"], new["steps"], strict=True)
        if TIMING.sub("<t>", a.get("observation", "")) != TIMING.sub("<t>", b["observation"])
    ]
    if check:
        print(f"{path.name}: " + ("\n".join(changed) or "every observation reproduces"))
        return bool(changed)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in fresh))
    print(f"{path.name}: {len(fresh)} trajectories re-recorded, {len(changed)} observations changed")
    return False


if __name__ == "__main__":
    sys.exit(main())
