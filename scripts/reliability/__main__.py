"""Load runs on loopback, bounded in count and time: `python -m scripts.reliability` (`make reliability`).

1. WebSocket viewers of one live batch  -> var/reliability/ws_viewers.json
2. The API under a fixed number of requests -> var/reliability/api_load.json
3. A long scripted batch, worker memory sampled -> var/reliability/worker_memory.json

Defaults are short (a few minutes on a quiet 2-core machine); the flags lengthen them. The exit
status is 1 when a run did not hold: a viewer dropped or missed an event, an API error, a
trajectory not finished, or worker memory growing by more than --max-growth MiB over the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from scripts.reliability import api, memory, viewers
from scripts.reliability.stack import REPO, Stack


def machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "load_avg_1_5_15": [round(x, 2) for x in load],
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=200)
    parser.add_argument("--viewer-samples", type=int, default=2, help="samples per demo task of the watched batch")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument(
        "--trajectories", type=int, default=300, help="the memory run's batch size (2000: the full run)"
    )
    parser.add_argument("--worker-concurrency", type=int, default=2)
    parser.add_argument("--max-growth", type=float, default=50.0, help="MiB the worker may grow by over the run")
    parser.add_argument("--only", choices=["viewers", "api", "memory"], action="append")
    parser.add_argument("--out", type=Path, default=REPO / "var" / "reliability")
    args = parser.parse_args()
    if min(args.viewers, args.viewer_samples, args.requests, args.clients, args.trajectories) < 1:
        parser.error("counts must be at least 1")
    runs = args.only or ["viewers", "api", "memory"]
    args.out.mkdir(parents=True, exist_ok=True)
    stack = Stack()
    ok = True
    try:
        stack.start()
        if "viewers" in runs:
            stack.worker("rollouts", 1, log="viewers-worker.log")
            figures = viewers.run(stack, args.viewers, args.viewer_samples)
            ok &= figures["dropped"] == 0 and figures["viewers_dropped"] == 0 and figures["batch_status"] == "succeeded"
            write(args.out / "ws_viewers.json", figures)
            stack.procs.pop().terminate()  # that worker: the memory run starts its own
        if "api" in runs:
            if "viewers" not in runs:  # something to read: one small batch
                worker = stack.worker("rollouts", 1, log="api-worker.log")
                batch = stack.scripted_batch(1, enqueue=True)
                while batch.status not in ("succeeded", "failed"):
                    time.sleep(1)
                    batch.refresh_from_db()
                worker.terminate()
            figures = api.run(stack, args.requests, args.clients)
            ok &= figures["errors"] == 0
            write(args.out / "api_load.json", figures)
        if "memory" in runs:
            figures = memory.run(stack, args.trajectories, args.worker_concurrency)
            ok &= figures["finished"] == figures["trajectories"] and figures["growth_mib"] <= args.max_growth
            write(args.out / "worker_memory.json", figures)
    finally:
        stack.stop(keep=not ok)
    return 0 if ok else 1


def write(path: Path, figures: dict[str, Any]) -> None:
    figures = {**figures, "machine": machine()}
    path.write_text(json.dumps(figures, indent=2) + "\n")
    shown = {k: v for k, v in figures.items() if k not in ("series", "endpoints")}
    print(f"{path.name}: {json.dumps(shown)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
