"""Redaction speed: MB/s of core.redaction over a 10 MB trajectory export.

The export is built from the project's own source files as observations (code is what
agents read most, and it is full of "@", "://" and dotted names), with one planted secret
per trajectory. Figures: the best and median of RUNS passes of `redact_record` over every
record (wall clock and CPU time), and JSON parsing of the same records, for scale.

python -m bench.redaction     (or `python -m bench redaction` once registered)
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import orjson

from core.redaction import redact_record

ROOT = Path(__file__).resolve().parent.parent
TARGET_BYTES = int(os.environ.get("BENCH_REDACTION_BYTES", str(10_000_000)))
RUNS = int(os.environ.get("BENCH_REDACTION_RUNS", "3"))
PLANTED = (
    "export AWS_ACCESS_KEY_ID=AKIAQ3EGUJ5XMPL7TEST",
    "ssh deploy@vault-3.prod.internal",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lg\n-----END RSA PRIVATE KEY-----",
    "DATABASE_URL=postgres://app:hunter2hunter@10.0.3.7/app",
)


def export(target: int = TARGET_BYTES) -> list[dict[str, Any]]:
    sources = sorted(
        p for d in ("core", "tasks", "trajectories", "rewards", "training") for p in (ROOT / d).rglob("*.py")
    )
    texts = [p.read_text(errors="replace")[:6000] for p in sources]
    records: list[dict[str, Any]] = []
    size, n = 0, 0
    while size < target:
        steps = []
        for i in range(8):
            text = texts[n % len(texts)]
            n += 1
            if i == 3:
                text += "\n" + PLANTED[len(records) % len(PLANTED)]
            steps.append(
                {
                    "step": i,
                    "action_type": "read_file",
                    "action_input": {"path": str(sources[n % len(sources)].relative_to(ROOT))},
                    "observation": text,
                    "thought": "Read the module before changing it.",
                }
            )
        record = {"task_id": "t", "prompt": "Fix the bug.", "patch": "", "steps": steps}
        records.append(record)
        size += len(orjson.dumps(record))
    return records


def run() -> dict[str, Any]:
    records = export()
    total = sum(len(orjson.dumps(r)) for r in records)
    passes, cpu, parse = [], [], []
    findings = 0
    for _ in range(RUNS):
        started, cpu_started = time.perf_counter(), time.process_time()
        findings = sum(len(redact_record(r, "trajectory")[1]) for r in records)
        passes.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        lines = [orjson.dumps(r) for r in records]
        started = time.perf_counter()
        for line in lines:
            orjson.loads(line)
        parse.append(time.perf_counter() - started)
    mb = total / 1e6
    return {
        "summary": {
            "mb": round(mb, 1),
            "records": len(records),
            "findings": findings,
            "redact_mb_s_best": round(mb / min(passes), 1),
            "redact_mb_s_median": round(mb / statistics.median(passes), 1),
            # CPU time: what a busy machine's wall clock hides (other processes' share).
            "redact_mb_s_cpu_median": round(mb / statistics.median(cpu), 1),
            "json_parse_mb_s_median": round(mb / statistics.median(parse), 1),
        },
        "load_average": os.getloadavg()[0],
    }


if __name__ == "__main__":
    print(orjson.dumps(run(), option=orjson.OPT_INDENT_2).decode())
