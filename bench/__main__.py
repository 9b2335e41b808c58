"""`make bench`: run the benchmarks and write var/bench/<name>.json.

python -m bench              # every benchmark
python -m bench jsonl_io     # only these
python -m bench --check      # and exit non-zero when a check is missed (`make bench CHECK=1`)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench import (
    checks,
    compare_page,
    cuda_grpo,
    env_step,
    environments,
    export_api,
    grpo_fleet,
    jsonl_io,
    learning,
    model_speed,
    real_history,
    redaction,
    review_pages,
    rollouts,
    sandbox_start,
    scaling,
    score_patch,
    strength,
    training_wrapper,
    validation,
)

BENCHES = {
    "sandbox_start": sandbox_start.run,
    "score_patch": score_patch.run,
    "validation": validation.run,
    "real_history": real_history.run,
    "strength": strength.run,
    "environments": environments.run,
    "rollouts": rollouts.run,
    "review_pages": review_pages.run,
    "compare_page": compare_page.run,
    "export_api": export_api.run,
    "jsonl_io": jsonl_io.run,
    "learning": learning.run,
    "model_speed": model_speed.run,
    "training_wrapper": training_wrapper.run,
    "scaling": scaling.run,
    "redaction": redaction.run,
    "env_step": env_step.run,
    "grpo_fleet": grpo_fleet.run,
    "cuda_grpo": cuda_grpo.run,
}
OUT = Path(__file__).resolve().parent.parent / "var" / "bench"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", default=[], help=f"some of: {', '.join(BENCHES)}")
    parser.add_argument("--check", action="store_true", help="exit 1 when a bench misses one of its targets")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.names or list(BENCHES):
        started, load_before = time.time(), checks.load_average()
        result = BENCHES[name]()
        result.update(
            {
                "bench": name,
                "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "wall_s": round(time.time() - started, 1),
                "load_average": {"before": load_before, "after": checks.load_average()},
            }
        )
        (OUT / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(f"{name}: {json.dumps(result.get('summary', result))}")
        rows += [(name, row) for row in result.get("checks", [])]
    print(checks.table(rows))
    missed = [row for _, row in rows if not row["met"]]
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
