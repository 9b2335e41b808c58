"""The whole verdict (both runs, the held-out calls, the static scan) against bare pytest, at three sizes.

The floor is what scoring cannot avoid: pytest over the same hidden tests on a patched copy, in the
sandbox's own runner venv (pytest and nothing else: not Crucible's venv, whose dev plugins make pytest
start three times slower), on the host, no sandbox. Each size is a synthetic task with 15, 300 and
1,500 tests over files of 50; the calibration is warm (it is made once per task, not per patch), and
its one-off cost is reported beside. Target: the verdict <= 2.0x the floor, median of 5, at every size.
Planting the probes is reported on its own, per test, to show it stays linear.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.checks import check
from rewards.behaviour import plant_probes
from rewards.scoring import score_patch
from rewards.spec import load_spec
from sandbox import Sandbox
from sandbox.backends.local import LocalBackend
from sandbox.runner_env import ensure_runner_env
from tasks.spec import TaskSpec, copy_hidden_tests

SIZES = [int(n) for n in os.environ.get("BENCH_SCORE_SIZES", "15,300,1500").split(",")]
RUNS = int(os.environ.get("BENCH_SCORE_RUNS", "5"))
PER_FILE = 50
TARGET = 2.0
SECRET = b"bench-score-patch" * 2

MODULE = '''"""Arithmetic with a bug in one place."""


def add(a, b):
    return a + b


def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return low  # the bug: should be high
    return value
'''


def _task(root: Path, tests: int) -> TaskSpec:
    base, hidden = root / "repo_snapshot", root / "tests"
    (base / "calc").mkdir(parents=True)
    (base / "calc" / "__init__.py").write_text(MODULE)
    hidden.mkdir()
    p2p = []
    for index in range(tests - 1):
        file = f"test_add_{index // PER_FILE:03d}.py"
        path = hidden / file
        if not path.exists():
            path.write_text("from calc import add\n")
        with path.open("a") as out:
            out.write(f"\n\ndef test_add_{index}():\n    assert add({index}, 1) == {index + 1}\n")
        p2p.append(f"tests/{file}::test_add_{index}")
    (hidden / "test_clamp.py").write_text(
        "from calc import clamp\n\n\ndef test_clamp_high():\n    assert clamp(9, 0, 5) == 5\n"
    )
    with Sandbox(base, LocalBackend(allow_unsafe=True)) as box:
        box.edit_file("calc/__init__.py", "        return low  # the bug: should be high\n", "        return high\n")
        fix = box.diff()
    return TaskSpec(
        task_id=f"bench-{tests}",
        base_dir=base,
        tests_dir=hidden,
        fail_to_pass=("tests/test_clamp.py::test_clamp_high",),
        pass_to_pass=tuple(p2p),
        timeout_seconds=600,
        expected_patch=fix,
    )


def _bare(task: TaskSpec, python: Path) -> float:
    """pytest in the runner venv over the hidden tests of a patched copy: the floor."""
    with tempfile.TemporaryDirectory(prefix="crucible-bench-bare-") as name:
        work = Path(name) / "repo"
        shutil.copytree(task.base_dir, work)
        subprocess.run(["git", "apply", "-"], cwd=work, input=task.expected_patch.encode(), check=True)
        shutil.copytree(task.tests_dir, work / "tests")
        started = time.perf_counter()
        subprocess.run(
            [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
            cwd=work,
            check=True,
            capture_output=True,
            env={"PATH": os.environ["PATH"], "HOME": name, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        return time.perf_counter() - started


def _planting_s(task: TaskSpec) -> float:
    with Sandbox(task.base_dir, LocalBackend(allow_unsafe=True)) as box:
        copy_hidden_tests(box, task)
        started = time.perf_counter()
        plant_probes(box.workspace, task, b"bench")
        return time.perf_counter() - started


def _size(tests: int, python: Path, cache: Path) -> dict[str, Any]:
    spec = load_spec()
    with tempfile.TemporaryDirectory(prefix=f"crucible-bench-{tests}-") as name:
        task = _task(Path(name), tests)
        started = time.perf_counter()
        first = score_patch(task, task.expected_patch, spec, secret=SECRET, calibration_cache=cache)
        calibration_s = time.perf_counter() - started
        if first.reward != 1.0:
            raise RuntimeError(f"the expected patch scored {first.reward} at {tests} tests: {first.flags}")
        _bare(task, python)  # warm the page cache
        bare, verdict = [], []
        for _ in range(RUNS):
            bare.append(_bare(task, python))
            started = time.perf_counter()
            score_patch(task, task.expected_patch, spec, secret=SECRET, calibration_cache=cache)
            verdict.append(time.perf_counter() - started)
        planting = _planting_s(task)
    ratio = statistics.median(verdict) / statistics.median(bare)
    return {
        "tests": tests,
        "bare_pytest_s": [round(s, 3) for s in bare],
        "verdict_s": [round(s, 3) for s in verdict],
        "bare_p50_s": round(statistics.median(bare), 3),
        "verdict_p50_s": round(statistics.median(verdict), 3),
        "ratio": round(ratio, 2),
        "first_verdict_with_calibration_s": round(calibration_s, 3),
        "planting_s": round(planting, 3),
        "planting_ms_per_test": round(planting * 1000 / tests, 3),
    }


def run() -> dict[str, Any]:
    python = ensure_runner_env() / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="crucible-bench-calibrations-") as cache:
        sizes = [_size(n, python, Path(cache)) for n in SIZES]
    worst = max(s["ratio"] for s in sizes)
    return {
        "runs": RUNS,
        "floor": "pytest in the sandbox's runner venv, on the host",
        "sizes": sizes,
        "target_ratio": TARGET,
        "load_average": round(os.getloadavg()[0], 2),
        "checks": [
            check(
                f"verdict vs runner pytest, {s['tests']} tests",
                s["ratio"],
                TARGET,
                better="lower",
                unit="x",
                floor="pytest in the runner venv, same tests, same run",
            )
            for s in sizes
        ],
        "summary": {
            **{f"ratio_{s['tests']}": s["ratio"] for s in sizes},
            **{f"planting_ms_per_test_{s['tests']}": s["planting_ms_per_test"] for s in sizes},
            "worst_ratio": worst,
            "meets_target": worst <= TARGET,
        },
    }
