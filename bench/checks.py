"""Targets a benchmark holds itself to, each measured against a floor in the same run.

A bench returns `"checks": [check(...), ...]` beside its figures. A ratio is the same work
done by Crucible and done bare (a raw writer, a minimal view, bare bwrap, pytest in the
runner venv) in interleaved rounds of one run, so a busy machine slows both sides alike
and the ratio stays comparable between runs; an absolute figure is checked too where the
design names one, with the load average recorded beside it.

`python -m bench --check` (`make bench CHECK=1`) prints the table and exits non-zero when
any check is missed.
"""

from __future__ import annotations

import os
from typing import Any, Literal

Better = Literal["lower", "higher"]


def check(name: str, value: float, target: float, *, better: Better, unit: str = "", floor: str = "") -> dict[str, Any]:
    """One line of the table: `value` against `target`, lower or higher being better.

    `floor` names what a ratio is taken against ("bare bwrap --unshare-all"), empty for an
    absolute figure.
    """
    met = value <= target if better == "lower" else value >= target
    return {
        "name": name,
        "value": round(value, 3),
        "target": target,
        "better": better,
        "unit": unit,
        "floor": floor,
        "met": bool(met),
    }


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """The checks of every bench that ran, one per line, misses marked."""
    if not rows:
        return "no checks ran"
    lines = [f"{'bench':<16} {'check':<44} {'value':>12} {'target':>12}  {'':4} floor"]
    for bench, row in rows:
        sign = "<=" if row["better"] == "lower" else ">="
        value = f"{row['value']:g}{row['unit']}"
        target = f"{sign} {row['target']:g}{row['unit']}"
        mark = "ok" if row["met"] else "MISS"
        lines.append(f"{bench:<16} {row['name']:<44} {value:>12} {target:>12}  {mark:4} {row['floor']}")
    missed = sum(1 for _, row in rows if not row["met"])
    lines.append(f"{len(rows) - missed} of {len(rows)} checks met")
    return "\n".join(lines)
