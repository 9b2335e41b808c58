"""A trainer's system metrics measure the process: busy CPU shows as CPU, memory as the resident set."""

from __future__ import annotations

import time

from training.trainers.system import SystemUsage


def test_a_busy_interval_reads_near_one_core_and_an_idle_one_near_none() -> None:
    usage = SystemUsage()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # one core busy for 0.3 s of CPU
        pass
    busy = usage.sample()
    time.sleep(0.3)
    idle = usage.sample()
    assert busy["system_cpu_percent"] > 20  # on a loaded 2-core machine the wall clock stretches
    assert idle["system_cpu_percent"] < 20
    assert busy["system_rss_mb"] > 10
    ballast = bytearray(200 * 2**20)  # 200 MiB written: resident
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    assert usage.sample()["system_rss_mb"] > busy["system_rss_mb"] + 150
    assert "system_gpu_memory_mb" not in idle  # no GPU here; a GPU adds its peak memory
