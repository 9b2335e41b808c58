"""What a training process costs the machine between two logged steps: its CPU, its memory, the GPU's.

Plain Python beside the trainer (no Django); each value is a `system_` metric, charted in the run
page's System group beside the curves, so a slow or swapping run shows why.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any


def _resident_mb() -> float:
    """The process's resident memory now (Linux /proc), else its peak (getrusage, KiB on Linux)."""
    try:
        pages = int(open("/proc/self/statm").read().split()[1])  # noqa: SIM115 - one read of a proc file
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _gpu_memory_mb() -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


class SystemUsage:
    """CPU use since the last sample (100 = one core busy), resident memory, peak GPU memory."""

    def __init__(self) -> None:
        self._wall = time.monotonic()
        self._cpu = time.process_time()

    def sample(self) -> dict[str, Any]:
        wall, cpu = time.monotonic(), time.process_time()
        values: dict[str, Any] = {"system_rss_mb": _resident_mb()}
        if wall > self._wall:
            values["system_cpu_percent"] = round(100.0 * (cpu - self._cpu) / (wall - self._wall), 1)
        gpu = _gpu_memory_mb()
        if gpu is not None:
            values["system_gpu_memory_mb"] = gpu
        self._wall, self._cpu = wall, cpu
        return values
