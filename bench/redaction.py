"""Redaction speed: MB/s of core.redaction over trajectory exports, against the same rules applied bare.

Two exports of about 10 MB each. `code`: the project's own source files as observations (code
is what agents read most, and it is full of "@", "://" and dotted names), with one planted
secret per trajectory. `steps`: bench/synthetic.py's short agent steps (test output, commands,
thoughts), what an import mostly holds and where nothing is to be found. In each of RUNS rounds
`redact_record` goes over every record, and so does the floor: the same rules' regexes applied
to every string in one plain loop (`re.subn` per rule, no trigger checks, no kept examples), in
alternating order, so a busy machine slows both alike. Figures: medians of CPU time (wall clock
beside them), both sides' findings (the floor also counts what Crucible keeps on purpose), the
same records redacted through one Scope each (what an import does), JSON parsing of the same
records for scale, and a check per export: Crucible's speed over the floor's, the median of the
rounds' ratios.

python -m bench.redaction     (or `python -m bench redaction`)
"""

from __future__ import annotations

import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.checks import check
from bench.synthetic import write_jsonl
from core.redaction import Redactor, default, placeholder, redact_record, strings

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


def bare_rules(redactor: Redactor) -> list[tuple[re.Pattern[str], str]]:
    """The redactor's rules as plain regexes, each replacing its whole match."""
    return [(re.compile(re.escape(rule.lead) + rule.pattern), placeholder(rule.name)) for rule in redactor.rules]


def redact_bare(records: list[dict[str, Any]], rules: list[tuple[re.Pattern[str], str]]) -> int:
    found = 0
    for record in records:
        for text in strings(record):
            for pattern, replacement in rules:
                text, hits = pattern.subn(replacement, text)
                found += hits
    return found


def redact_crucible(records: list[dict[str, Any]]) -> int:
    return sum(len(redact_record(r, "trajectory")[1]) for r in records)


def _timed(work: Any, *args: Any) -> tuple[float, float, int]:
    started, cpu_started = time.perf_counter(), time.process_time()
    result = work(*args)
    return time.perf_counter() - started, time.process_time() - cpu_started, result


def steps_export(target: int = TARGET_BYTES) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-") as name:
        path = Path(name) / "steps.jsonl"
        write_jsonl(path, max(1, target // 33_000), 100)
        return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def redact_scoped(records: list[dict[str, Any]]) -> int:
    redactor = default()
    return sum(len(redact_record(r, "trajectory", redactor=redactor.scope(strings(r)))[1]) for r in records)


# What each export's ratio is held to: well below what this scan reaches (about 7x and 4x on a
# 2-core box), well above what it reached when every rule was checked in Python per string
# (6x and 1.4x): a regression shows.
TARGETS = {"code": 4.0, "steps": 2.5}


def _measure(records: list[dict[str, Any]], rules: list[tuple[re.Pattern[str], str]]) -> dict[str, Any]:
    wall: dict[str, list[float]] = {"crucible": [], "bare": [], "scoped": []}
    cpu: dict[str, list[float]] = {"crucible": [], "bare": [], "scoped": []}
    found = {"crucible": 0, "bare": 0, "scoped": 0}
    parse, ratios = [], []
    for round_ in range(RUNS):
        sides = [
            ("crucible", redact_crucible, (records,)),
            ("bare", redact_bare, (records, rules)),
            ("scoped", redact_scoped, (records,)),
        ]
        for side, work, args in reversed(sides) if round_ % 2 else sides:
            seconds, cpu_seconds, found[side] = _timed(work, *args)
            wall[side].append(seconds)
            cpu[side].append(cpu_seconds)
        ratios.append(cpu["bare"][-1] / cpu["crucible"][-1])
        lines = [orjson.dumps(r) for r in records]
        started = time.perf_counter()
        for line in lines:
            orjson.loads(line)
        parse.append(time.perf_counter() - started)
    mb = sum(len(orjson.dumps(r)) for r in records) / 1e6
    return {
        "mb": round(mb, 1),
        "records": len(records),
        "findings": found["crucible"],
        "bare_findings": found["bare"],
        "scoped_findings": found["scoped"],
        # CPU time: what a busy machine's wall clock hides (other processes' share).
        "redact_mb_s_cpu_median": round(mb / statistics.median(cpu["crucible"]), 1),
        "redact_mb_s_median": round(mb / statistics.median(wall["crucible"]), 1),
        "bare_mb_s_cpu_median": round(mb / statistics.median(cpu["bare"]), 1),
        "scoped_mb_s_cpu_median": round(mb / statistics.median(cpu["scoped"]), 1),
        "vs_bare": round(statistics.median(ratios), 2),
        "json_parse_mb_s_median": round(mb / statistics.median(parse), 1),
    }


def run() -> dict[str, Any]:
    rules = bare_rules(default())
    summary = {"code": _measure(export(), rules), "steps": _measure(steps_export(), rules)}
    checks = [
        check(
            f"redact_vs_bare_rules_{name}",
            figures["vs_bare"],
            TARGETS[name],
            better="higher",
            unit="x",
            floor="the same rules' regexes, re.subn per rule per string",
        )
        for name, figures in summary.items()
    ]
    return {"summary": summary, "checks": checks, "load_average": os.getloadavg()[0]}


if __name__ == "__main__":
    print(orjson.dumps(run(), option=orjson.OPT_INDENT_2).decode())
