"""A trainer's system metrics measure the process: busy CPU shows as CPU, memory as the resident set."""

from __future__ import annotations

import time

from training.trainers.system import SystemUsage


def test_a_busy_interval_reads_its_cpu_over_its_wall_time_and_an_idle_one_near_none() -> None:
    usage = SystemUsage()
    wall, cpu = time.monotonic(), time.process_time()
    deadline = cpu + 0.3
    while time.process_time() < deadline:  # one core busy for 0.3 s of CPU
        pass
    busy = usage.sample()
    # What the process really got: on a loaded 2-core CI machine the wall clock stretches (a share
    # of 13 % was seen), so the reading is checked against the interval, not against a fixed floor.
    got = 100 * (time.process_time() - cpu) / (time.monotonic() - wall)
    time.sleep(0.3)
    idle = usage.sample()
    assert abs(busy["system_cpu_percent"] - got) <= max(5.0, 0.25 * got)
    assert busy["system_cpu_percent"] > 2 * idle["system_cpu_percent"]
    assert idle["system_cpu_percent"] < 20
    assert busy["system_rss_mb"] > 10
    ballast = bytearray(200 * 2**20)  # 200 MiB written: resident
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    assert usage.sample()["system_rss_mb"] > busy["system_rss_mb"] + 150
    assert "system_gpu_memory_mb" not in idle  # no GPU here; a GPU adds its peak memory


def test_the_gpu_busy_share_is_the_mean_of_the_readings_since_the_last_sample() -> None:
    from training.trainers.system import BusySampler

    readings = iter([100.0, 100.0, 0.0, 0.0] + [50.0] * 10_000)
    sampler = BusySampler(lambda: next(readings), period=0.01)
    try:
        usage = SystemUsage(gpu=sampler)  # takes once: what was read before it is not its interval
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and sampler._count < 5:  # the four uneven readings are in
            time.sleep(0.01)
        first = usage.sample()["system_gpu_util_percent"]
        assert 0 <= first <= 100
        time.sleep(0.2)
        assert usage.sample()["system_gpu_util_percent"] == 50.0  # only the steady readings since
    finally:
        sampler.close()


def test_a_reader_that_fails_loses_readings_not_the_run() -> None:
    from training.trainers.system import BusySampler

    def broken() -> float:
        raise RuntimeError("NVML went away")

    sampler = BusySampler(broken, period=0.01)
    try:
        time.sleep(0.1)
        values = SystemUsage(gpu=sampler).sample()
        assert "system_gpu_util_percent" not in values
    finally:
        sampler.close()
