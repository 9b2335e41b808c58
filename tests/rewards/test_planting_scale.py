"""Planting is linear in the number of tests: a file of 5,000 generated tests is planted in about
ten times the time of one of 500 (it was quadratic: each test was found by scanning its file)."""

from __future__ import annotations

import time
from pathlib import Path

from rewards.behaviour import plant_probes
from tasks.spec import TaskSpec
from tests.rewards.probing import SALT


def _task(root: Path, count: int) -> tuple[TaskSpec, Path]:
    base, tests = root / "base", root / "tests"
    (base / "pkg").mkdir(parents=True)
    (base / "pkg" / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    tests.mkdir()
    body = "".join(
        f"def test_double_{i}():\n    assert double({i}) == {2 * i}\n    assert double(-{i}) == -{2 * i}\n\n\n"
        for i in range(count)
    )
    (tests / "test_gen.py").write_text("import pytest\n\nfrom pkg import double\n\npytestmark = []\n\n\n" + body)
    ids = tuple(f"tests/test_gen.py::test_double_{i}" for i in range(count))
    task = TaskSpec(task_id=f"gen{count}", base_dir=base, tests_dir=tests, fail_to_pass=ids, pass_to_pass=())
    workspace = root / "workspace"
    (workspace / "pkg").mkdir(parents=True)
    (workspace / "pkg" / "__init__.py").write_text((base / "pkg" / "__init__.py").read_text())
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_gen.py").write_text((tests / "test_gen.py").read_text())
    return task, workspace


def _planting_seconds(root: Path, count: int) -> float:
    task, workspace = _task(root, count)
    started = time.process_time()
    probes = plant_probes(workspace, task, SALT)
    spent = time.process_time() - started
    assert probes.twin_ids and probes.canary_ids  # it planted: the time is the real work's
    return spent


def test_planting_5000_generated_tests_costs_about_ten_times_500(tmp_path: Path) -> None:
    small = min(_planting_seconds(tmp_path / f"small{i}", 500) for i in range(2))
    large = _planting_seconds(tmp_path / "large", 5000)
    # Linear is 10x; quadratic was 100x. CPU time, so a busy machine moves both alike.
    print(f"planting: 500 tests {small:.2f} s, 5,000 tests {large:.2f} s of CPU")
    assert large < 25 * small, f"5,000 tests took {large:.2f} s of CPU, 500 took {small:.2f} s"
