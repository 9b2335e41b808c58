"""The static scan, bounded: in a child process with a deadline and a memory cap.

The scan parses and folds what the agent wrote, so the agent chooses its input: a megabyte of
string constants, a nesting the parser recurses into, a payload that decodes to more payload.
Every pattern is linear (rewards.anticheat.patterns), but a bound that holds whatever the input
is the one outside the scan: the child is killed at its deadline, its address space capped, and
the scorer carries on with what it learned (an overrun is evidence of its own).

Run as `python -m rewards.anticheat.bounded` with a JSON request on stdin; the answer is one
JSON object on stdout. Plain Python, like the rest of the package.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from core.vocabulary import Detector
from rewards.anticheat.flags import Flag, SourceScan
from rewards.anticheat.scan import scan_sources

logger = logging.getLogger(__name__)

SCAN_DEADLINE_S = 60.0
SCAN_MEMORY_BYTES = 1024 * 1024 * 1024
OVERRUN = Detector.SCAN_OVERRUN
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The child reports at most this much; a bigger answer is itself a sign of something odd.
MAX_ANSWER_BYTES = 4 * 1024 * 1024


def scan_sources_bounded(
    workspace: Path,
    paths: Iterable[str],
    base: Path | None = None,
    *,
    deadline_s: float = SCAN_DEADLINE_S,
    memory_bytes: int = SCAN_MEMORY_BYTES,
) -> SourceScan:
    """scan_sources in a child process; an overrun (time, memory, a crash) is a `scan_overrun` flag."""
    wanted = [p for p in paths if p.endswith(".py")]
    if not wanted:
        return SourceScan()
    request = {
        "workspace": str(workspace),
        "paths": wanted,
        "base": str(base) if base else None,
        "memory_bytes": memory_bytes,
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rewards.anticheat.bounded"],
            input=json.dumps(request).encode(),
            capture_output=True,
            timeout=deadline_s,
            cwd=PROJECT_ROOT,
            env=_child_environment(),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return _overrun(wanted, f"the static scan of the changed files ran past its {deadline_s:g} s deadline")
    if done.returncode != 0 or len(done.stdout) > MAX_ANSWER_BYTES:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return _overrun(wanted, f"the static scan stopped (exit {done.returncode}: {tail[0][:200]})")
    try:
        answer = json.loads(done.stdout)
        return SourceScan(
            flags=[Flag(**flag) for flag in answer["flags"]],
            unparsed={str(k): str(v) for k, v in answer["unparsed"].items()},
        )
    except (ValueError, KeyError, TypeError) as exc:
        return _overrun(wanted, f"the static scan's answer could not be read ({type(exc).__name__})")


def _child_environment() -> dict[str, str]:
    """The scorer's environment, with compiled modules kept in the deployment's var folder: a scan
    child per verdict that compiled the scanner from source each time spent a third of its life on it.
    Not in the source tree (it may be read-only) and not in a shared temp folder (whoever can write
    there could plant a compiled module the scorer would run)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    var = Path(os.environ.get("CRUCIBLE_VAR_DIR") or PROJECT_ROOT / "var")
    return {**env, "PYTHONPATH": str(PROJECT_ROOT), "PYTHONPYCACHEPREFIX": str(var / "pycache")}


def _overrun(paths: list[str], why: str) -> SourceScan:
    logger.warning("%s (%s)", why, ", ".join(paths[:5]))
    return SourceScan(flags=[Flag(OVERRUN, f"{why}; files: {', '.join(p[:100] for p in paths[:5])}")])


def _child() -> None:
    request = json.loads(sys.stdin.buffer.read())
    limit = int(request["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    base = Path(request["base"]) if request["base"] else None
    scan = scan_sources(Path(request["workspace"]), request["paths"], base=base)
    answer = {"flags": [flag.to_json() for flag in scan.flags], "unparsed": scan.unparsed}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    _child()
