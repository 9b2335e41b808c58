"""`python -m training.trainers RUN_DIR` (or under `accelerate launch -m`): train one run.

RUN_DIR/config.json says what (kind sft | reward | dpo | grpo); events go to stdout as JSON
lines, log to stderr; the exit code is 0 only when the run succeeded.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from pathlib import Path

from training.trainers.common import TrainerError, emit, log, quiet_libraries, read_config
from training.trainers.trackers import tracker_directories

# kind -> module with train(config); imported on demand so a kind's dependencies load only when used.
TRAINERS = {
    "sft": "training.trainers.sft",
    "reward": "training.trainers.reward",
    "dpo": "training.trainers.dpo",
    "grpo": "training.trainers.grpo",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.trainers", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a directory holding config.json")
    args = parser.parse_args(argv)
    try:
        config = read_config(args.run_dir)
        quiet_libraries()
        tracker_directories(config.report_to, config.run_output or config.output_dir)
        module = importlib.import_module(TRAINERS[config.kind])
        config.output_dir.mkdir(parents=True, exist_ok=True)
        module.train(config)
    except TrainerError as exc:
        log(f"error: {exc}")
        emit({"event": "done", "status": "failed", "error": str(exc)})
        return 2
    except Exception as exc:  # noqa: BLE001 - the launcher shows the log tail; say what failed, then fail
        traceback.print_exc()
        emit({"event": "done", "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000]})
        return 1
    emit({"event": "done", "status": "succeeded"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
