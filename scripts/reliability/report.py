"""Redraw the figures table of docs/reliability.md from var/reliability/*.json (`make reliability` ends with it).

Only the text between the two markers changes; a run that did not happen shows as "not run".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scripts.reliability.stack import REPO

DOC = REPO / "docs" / "reliability.md"
START, END = "<!-- figures:start -->", "<!-- figures:end -->"


def load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / name
    return json.loads(path.read_text()) if path.is_file() else None


def when(figures: dict[str, Any]) -> str:
    where = figures.get("machine") or {}
    if not where:
        return ""
    load = where.get("load_avg_1_5_15", ["?"])[0]
    return f" ({where.get('when', '')}, {where.get('cpus', '?')} CPUs, load {load})"


def rows(folder: Path) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    soak = load(folder, "soak_live.json")
    if soak:
        held = "held" if soak["reconnects"] == 0 and not any(soak["redis_timeouts_logged"].values()) else "FAILED"
        out.append(
            (
                f"Live layer soak, {soak['minutes']:g} min, {soak['viewers']} viewers ({soak['idle_viewers']} idle)",
                f"{soak['trajectories_finished']} trajectories, {soak['events_seen']} events, "
                f"{soak['reconnects']} reconnects, "
                f"Redis timeouts logged: {sum(soak['redis_timeouts_logged'].values())}",
                held,
            )
        )
    else:
        out.append(("Live layer soak", "not run", ""))
    ws = load(folder, "ws_viewers.json")
    if ws:
        held = (
            "held"
            if ws["dropped"] == 0 and ws["viewers_dropped"] == 0 and ws["batch_status"] == "succeeded"
            else "FAILED"
        )
        out.append(
            (
                f"{ws['viewers']} WebSocket viewers of one live batch{when(ws)}",
                f"{ws['trajectories']} trajectories, {ws['events']} distinct events, {ws['deliveries']} of "
                f"{ws['deliveries_expected']} deliveries, {ws['dropped']} dropped, "
                f"{ws['viewers_dropped']} sockets lost; "
                f"publish→viewer p50 {ws['latency_p50_ms']} ms, p95 {ws['latency_p95_ms']} ms, "
                f"max {ws['latency_max_ms']} ms",
                held,
            )
        )
    else:
        out.append(("WebSocket viewers of one live batch", "not run", ""))
    api = load(folder, "api_load.json")
    if api:
        out.append(
            (
                f"API, {api['requests']} requests from {api['clients']} clients{when(api)}",
                f"{api['requests_per_s']} requests/s, p50 {api['p50_ms']} ms, p95 {api['p95_ms']} ms, "
                f"errors {api['errors']}, over {len(api['endpoints'])} read endpoints"
                + (
                    f" ({len(api['endpoints_not_answering'])} not in this version)"
                    if api["endpoints_not_answering"]
                    else ""
                ),
                "held" if api["errors"] == 0 else "FAILED",
            )
        )
    else:
        out.append(("API under load", "not run", ""))
    mem = load(folder, "worker_memory.json")
    if mem:
        held = "held" if mem["finished"] == mem["trajectories"] else "FAILED"
        out.append(
            (
                f"Scripted batch of {mem['trajectories']}, worker RSS every {mem['sample_every_s']:g} s{when(mem)}",
                f"{mem['finished']} finished at {mem['trajectories_per_s']}/s; RSS start {mem['rss_start_mib']} MiB, "
                f"peak {mem['rss_peak_mib']}, end {mem['rss_end_mib']} (growth {mem['growth_mib']} MiB, "
                f"slope {mem['slope_mib_per_1000']} MiB per 1,000)",
                held,
            )
        )
    else:
        out.append(("Scripted batch, worker memory", "not run", ""))
    return out


def render(folder: Path) -> str:
    lines = ["| run | figures | verdict |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows(folder)]
    return "\n".join(lines)


def main() -> int:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "var" / "reliability"
    text = DOC.read_text()
    if START not in text or END not in text:
        print(f"{DOC}: the figures markers are missing", file=sys.stderr)
        return 1
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{render(folder)}\n{END}{tail}")
    print(f"{DOC.relative_to(REPO)}: figures table redrawn from {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
