"""Sandbox start + `true`, per backend, against a bare subprocess.run(["true"]) and a bare
`bwrap --unshare-all ... true` in the same run; the bwrap backend also from a parent holding
2 GiB, as a rollout worker with a model loaded does (starting a command must not cost in
proportion to the parent's memory).

Targets: bwrap p50 <= 30 ms; docker-API backend p50 <= 500 ms.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox import Limits
from sandbox.backends.base import Backend
from sandbox.backends.bwrap import BwrapBackend
from sandbox.backends.docker import DockerBackend
from sandbox.names import BackendName
from sandbox.podman import PodmanUnavailable, podman_service

RUNS = int(os.environ.get("BENCH_SANDBOX_RUNS", "100"))
DOCKER_RUNS = int(os.environ.get("BENCH_DOCKER_RUNS", "20"))
HEAVY_BYTES = 2 << 30
# bwrap alone: the floor the backend's start is measured against.
BARE_BWRAP = [
    "bwrap",
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    "/",
    "/",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "true",
]


def _timings(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm caches (page cache, image layers) before measuring
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _stats(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "min_ms": round(ordered[0], 2),
        "runs": len(ordered),
    }


def _backend(backend: Backend, workspace: Path, runs: int, bare_p50: float) -> dict[str, Any]:
    limits = Limits(wall_seconds=30)

    def start_true() -> None:
        result = backend.run(["true"], workspace, limits)
        if result.exit_code != 0:
            raise RuntimeError(f"{backend.name}: `true` failed: {result.stderr[:300]}")

    stats: dict[str, Any] = _stats(_timings(start_true, runs))
    stats["ratio_to_bare_p50"] = round(stats["p50_ms"] / bare_p50, 1)
    return stats


def run() -> dict[str, Any]:
    result: dict[str, Any] = {"targets": {"bwrap_p50_ms": 30, "docker_p50_ms": 500}}
    with tempfile.TemporaryDirectory(prefix="crucible-bench-ws-") as name:
        workspace = Path(name)
        bare = _stats(_timings(lambda: subprocess.run(["true"], check=True), RUNS))
        result["bare_subprocess"] = bare
        bare_bwrap = _stats(_timings(lambda: subprocess.run(BARE_BWRAP, check=True), RUNS))
        result["bare_bwrap"] = bare_bwrap
        result[BackendName.BWRAP] = _backend(BwrapBackend(), workspace, RUNS, bare["p50_ms"])
        result[BackendName.BWRAP]["ratio_to_bare_bwrap_p50"] = round(
            result[BackendName.BWRAP]["p50_ms"] / bare_bwrap["p50_ms"], 2
        )
        heavy = bytearray(HEAVY_BYTES)
        heavy[:: 1 << 12] = b"\x01" * len(heavy[:: 1 << 12])  # touched: resident, as a loaded model is
        result["bwrap_from_a_2gib_parent"] = _backend(BwrapBackend(), workspace, max(10, RUNS // 4), bare["p50_ms"])
        del heavy
        result[BackendName.DOCKER] = _docker(workspace, bare["p50_ms"])
    result["summary"] = {
        k: result[k]["p50_ms"] if isinstance(result[k], dict) else result[k]
        for k in ("bare_subprocess", "bare_bwrap", BackendName.BWRAP, "bwrap_from_a_2gib_parent", BackendName.DOCKER)
    }
    return result


def _docker(workspace: Path, bare_p50: float) -> Any:
    try:
        with podman_service() as base_url:
            backend = DockerBackend(base_url=base_url)
            try:
                return _backend(backend, workspace, DOCKER_RUNS, bare_p50)
            finally:
                backend.close()
    except PodmanUnavailable as exc:
        return f"unavailable: {exc}"
