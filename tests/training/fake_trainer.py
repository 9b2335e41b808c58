"""A stand-in trainer that speaks the trainer protocol (training.trainers) without training.

Plain Python, like the real one. FAKE_TRAINER sets its behaviour:
- "ok" (default): a metric per step, a checkpoint every logging.save_every_steps, done, exit 0;
- "fail": some log lines on stderr, then exit 3;
- "slow": like ok, but FAKE_TRAINER_STEP_S seconds per step and a child process of its own
  (so cancel has a whole tree to stop);
- "hang": one metric, one checkpoint, then it sleeps (a worker killed under it leaves it);
- "sigkill": one metric, then SIGKILL to itself, as the kernel's OOM killer ends a trainer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def emit(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


def checkpoint(output: Path, step: int) -> str:
    path = output / f"checkpoint-{step}"
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"fake": True, "step": step}))
    return str(path)


def main(run_dir: str) -> int:
    config = json.loads((Path(run_dir) / "config.json").read_text())
    mode = os.environ.get("FAKE_TRAINER", "ok")
    step_s = float(os.environ.get("FAKE_TRAINER_STEP_S", "0.05"))
    output = Path(config["output_dir"])
    print(f"fake trainer for a {config['kind']} run on {config['data']['train_file']}", file=sys.stderr, flush=True)
    if mode == "fail":
        for i in range(300):
            print(f"log line {i}", file=sys.stderr)
        print("RuntimeError: the fake trainer was told to fail", file=sys.stderr, flush=True)
        return 3
    if mode in ("slow", "hang"):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # noqa: S603
    steps = int(config["rl"]["max_steps"])
    save_every = int(config["logging"]["save_every_steps"])
    # Events carry the run's steps: a resumed run goes on from its checkpoint's.
    done = int(config.get("resume", {}).get("step", 0))
    for step in range(done + 1, max(steps, done + 1) + 1):
        time.sleep(step_s)
        emit({"event": "metric", "step": step, "values": {"loss": 2.0 / step, "learning_rate": 1e-5, "grad_norm": 1.5}})
        print(f"step {step} done")
        if step % save_every == 0 or step == steps or mode == "hang":
            emit(
                {
                    "event": "checkpoint",
                    "step": step,
                    "path": checkpoint(output, step),
                    "kind": "policy",
                    "metrics": {"loss": 2.0 / step},
                }
            )
        if mode == "hang":
            time.sleep(600)
        if mode == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
    emit({"event": "done", "status": "succeeded"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
