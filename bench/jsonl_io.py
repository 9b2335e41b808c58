"""JSONL import and export of 200k steps, on SQLite and PostgreSQL, against raw floors.

Each measured run is a fresh process (bench/_jsonl_io_child.py), so peak RSS is the whole
command's. In every round Crucible's `import_trajectories` and the raw writer import the same
file into an emptied database, and after each import Crucible's `export trajectories` and the raw
export write it back out; the order flips every round, so a busy machine slows both sides alike.
A ratio is Crucible's speed over the floor's in the same round; the figures are medians over
rounds. Every export of a run must give the same bytes, whichever side imported or exported:
that is what makes the floors the same work.

Checks: import >= 0.5x the raw writer (SQLite, PostgreSQL), >= 30k steps/s on PostgreSQL;
export >= 0.8x the raw export (both); import >= 10k steps/s on SQLite; export >= 50k steps/s;
peak RSS <= 300 MB.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.checks import check
from bench.databases import fresh_postgres
from bench.synthetic import write_jsonl

REPO = Path(__file__).resolve().parent.parent
TRAJECTORIES = int(os.environ.get("BENCH_JSONL_TRAJECTORIES", "2000"))
STEPS_PER = 100
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
PG_BENCH_DB = "crucible_bench_jsonl"
IMPORTS = ("import", "raw_import")
EXPORTS = ("export", "raw_export")


def _child(op: str, path: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds, peak RSS (MB) and the process's CPU seconds of one operation in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-m", "bench._jsonl_io_child", op, str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed, _base, peak, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(elapsed), int(peak) / 1024, float(cpu)


def _measure(database_url: str, source: Path, tmp: Path) -> dict[str, Any]:
    env = {**os.environ, "DATABASE_URL": database_url, "CRUCIBLE_VAR_DIR": str(tmp / "var")}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    steps = TRAJECTORIES * STEPS_PER
    seconds: dict[str, list[float]] = {op: [] for op in IMPORTS + EXPORTS}
    cpu: dict[str, list[float]] = {op: [] for op in IMPORTS + EXPORTS}
    ratios: dict[str, list[float]] = {"import": [], "export": []}
    rss: list[float] = []
    outputs: set[str] = set()
    for round_ in range(REPEATS):
        flip = round_ % 2 == 1
        for importer in reversed(IMPORTS) if flip else IMPORTS:
            _child("clear", source, env)
            elapsed, peak, used = _child(importer, source, env)
            seconds[importer].append(elapsed)
            cpu[importer].append(used)
            rss.append(peak)
            for exporter in reversed(EXPORTS) if flip == (importer == "import") else EXPORTS:
                out = tmp / f"{exporter}.jsonl"
                elapsed, peak, used = _child(exporter, out, env)
                seconds[exporter].append(elapsed)
                cpu[exporter].append(used)
                rss.append(peak)
                outputs.add(hashlib.sha256(out.read_bytes()).hexdigest())
            pair = len(seconds["export"]) - 1
            ratios["export"].append(seconds["raw_export"][pair] / seconds["export"][pair])
        ratios["import"].append(seconds["raw_import"][-1] / seconds["import"][-1])
    return {
        "steps": steps,
        **{f"{op}_s": [round(s, 3) for s in seconds[op]] for op in seconds},
        **{f"{op}_steps_per_s": round(steps / statistics.median(seconds[op])) for op in seconds},
        # The client process's CPU time (a PostgreSQL server's is not in it): what the load hides.
        **{f"{op}_cpu_s_median": round(statistics.median(cpu[op]), 3) for op in cpu},
        "import_vs_raw": round(statistics.median(ratios["import"]), 3),
        "export_vs_raw": round(statistics.median(ratios["export"]), 3),
        "peak_rss_mb": round(max(rss), 1),
        "outputs_identical": len(outputs) == 1,
    }


def _checks(db: str, figures: dict[str, Any]) -> list[dict[str, Any]]:
    floor_writer = "raw writer: orjson, check_record, the same redaction, " + (
        "COPY" if db == "postgresql" else "executemany"
    )
    rows = [
        check(f"import_vs_raw_{db}", figures["import_vs_raw"], 0.5, better="higher", unit="x", floor=floor_writer),
        check(
            f"export_vs_raw_{db}",
            figures["export_vs_raw"],
            0.8,
            better="higher",
            unit="x",
            floor="raw export: ordered SELECTs, orjson",
        ),
        check(f"export_steps_per_s_{db}", figures["export_steps_per_s"], 50000, better="higher", unit=" steps/s"),
        check(f"peak_rss_mb_{db}", figures["peak_rss_mb"], 300, better="lower", unit=" MB"),
        check(f"exports_identical_{db}", float(figures["outputs_identical"]), 1, better="higher"),
    ]
    target = 30000 if db == "postgresql" else 10000
    rows.append(
        check(f"import_steps_per_s_{db}", figures["import_steps_per_s"], target, better="higher", unit=" steps/s")
    )
    return rows


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-") as name:
        tmp = Path(name)
        source = tmp / "in.jsonl"
        started = time.perf_counter()
        write_jsonl(source, TRAJECTORIES, STEPS_PER)
        result: dict[str, Any] = {
            "file_mb": round(source.stat().st_size / 1e6, 1),
            "repeats": REPEATS,
            "generate_s": round(time.perf_counter() - started, 2),
            "sqlite": _measure(f"sqlite:///{tmp / 'bench.sqlite3'}", source, tmp),
        }
        pg = fresh_postgres(PG_BENCH_DB)
        result["postgresql"] = _measure(pg, source, tmp) if pg else "unavailable"
    summary: dict[str, Any] = {}
    checks: list[dict[str, Any]] = []
    for db in ("sqlite", "postgresql"):
        figures = result[db]
        if isinstance(figures, dict):
            keys = ("import_steps_per_s", "raw_import_steps_per_s", "import_vs_raw", "export_steps_per_s")
            summary[db] = {k: figures[k] for k in (*keys, "raw_export_steps_per_s", "export_vs_raw", "peak_rss_mb")}
            checks += _checks(db, figures)
    result["summary"] = summary
    result["checks"] = checks
    return result
