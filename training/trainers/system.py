"""What a training process costs the machine between two logged steps: its CPU, its memory, the GPU's.

Plain Python beside the trainer (no Django); each value is a `system_` metric, charted in the run
page's System group beside the curves, so a slow or swapping run shows why.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable
from typing import Any

# How often the GPU's busy share is read. NVML reports the share of its own last sample period
# (1/6 s to 1 s by card) in which a kernel ran: read often and averaged, it shows the gaps where
# the GPU waits for the host (generation between tool calls, the tests that score a patch).
GPU_SAMPLE_S = 0.25


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


def _gpu_busy_reader() -> Callable[[], float] | None:
    """NVML's busy share of this process's GPU (torch maps CUDA_VISIBLE_DEVICES), or None without one."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    device = torch.cuda.current_device()
    try:
        torch.cuda.utilization(device)  # needs NVML (nvidia-ml-py); a host without it has no reading
    except Exception:  # noqa: BLE001 - any failure means no reading, never a failed run
        return None
    return lambda: float(torch.cuda.utilization(device))


class BusySampler:
    """Reads a busy percentage on a daemon thread every `period` s; `take()` is the mean since the last take."""

    def __init__(self, read: Callable[[], float], period: float = GPU_SAMPLE_S) -> None:
        self._read, self._period = read, period
        self._lock = threading.Lock()
        self._sum, self._count = 0.0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-busy", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            try:
                value = self._read()
            except Exception:  # noqa: BLE001, S112 - a driver hiccup loses one reading, not the run
                continue
            with self._lock:
                self._sum, self._count = self._sum + value, self._count + 1

    def take(self) -> float | None:
        with self._lock:
            mean = self._sum / self._count if self._count else None
            self._sum, self._count = 0.0, 0
        return None if mean is None else round(mean, 1)

    def close(self) -> None:
        self._stop.set()


_gpu_sampler: BusySampler | None = None
_gpu_sampler_lock = threading.Lock()


def gpu_sampler() -> BusySampler | None:
    """One sampler per process, started on first use; None where there is no GPU to read."""
    global _gpu_sampler
    with _gpu_sampler_lock:
        if _gpu_sampler is None:
            read = _gpu_busy_reader()
            if read is None:
                return None
            _gpu_sampler = BusySampler(read)
        return _gpu_sampler


class SystemUsage:
    """CPU use since the last sample (100 = one core busy), resident memory, peak GPU memory, and the
    GPU's mean busy share since the last sample (`system_gpu_util_percent`)."""

    def __init__(self, gpu: BusySampler | None = None) -> None:
        # Found first: looking for a GPU imports torch, which is not the interval's work.
        self._gpu = gpu if gpu is not None else gpu_sampler()
        self._wall = time.monotonic()
        self._cpu = time.process_time()
        if self._gpu is not None:
            self._gpu.take()  # the interval starts now

    def sample(self) -> dict[str, Any]:
        wall, cpu = time.monotonic(), time.process_time()
        values: dict[str, Any] = {"system_rss_mb": _resident_mb()}
        if wall > self._wall:
            values["system_cpu_percent"] = round(100.0 * (cpu - self._cpu) / (wall - self._wall), 1)
        gpu = _gpu_memory_mb()
        if gpu is not None:
            values["system_gpu_memory_mb"] = gpu
        busy = self._gpu.take() if self._gpu is not None else None
        if busy is not None:
            values["system_gpu_util_percent"] = busy
        self._wall, self._cpu = wall, cpu
        return values
