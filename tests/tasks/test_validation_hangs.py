"""A fix for a test that hangs on the base code (an infinite loop the fix repairs): the per-test
timeout fails that test and the run goes on, so the task is valid; a base run that still meets the
run's own limit counts the hidden tests it never reported as failing before. Real bwrap runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import Sandbox
from sandbox.limits import Limits
from tasks.spec import TaskSpec
from tasks.validation import validate

# Counts steps down to 1: on the base an odd step leaves n as it is, so it loops for ever.
BASE = '''def steps_to_one(n):
    """How many steps n takes to reach 1, each step halving an even n and taking 1 from an odd one."""
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else n
        steps += 1
    return steps
'''
TESTS = """from collatz import steps_to_one


def test_even():
    assert steps_to_one(8) == 3


def test_odd():
    assert steps_to_one(7) == 4


def test_after_the_hang():
    assert steps_to_one(1) == 0
"""
LICENSE = "Permission is hereby granted, free of charge, to any person obtaining a copy\n"
STATEMENT = "steps_to_one never returns for some odd numbers: it should count steps down to one for every n."


def _task(tmp_path: Path, timeout: int) -> tuple[TaskSpec, str]:
    base = tmp_path / "base"
    base.mkdir()
    (base / "collatz.py").write_text(BASE)
    (base / "LICENSE").write_text(LICENSE)
    tests = tmp_path / "hidden"
    tests.mkdir()
    (tests / "test_collatz.py").write_text(TESTS)
    patch = (
        "diff --git a/collatz.py b/collatz.py\n--- a/collatz.py\n+++ b/collatz.py\n"
        "@@ -4,5 +4,5 @@\n"
        "     steps = 0\n     while n != 1:\n"
        "-        n = n // 2 if n % 2 == 0 else n\n"
        "+        n = n // 2 if n % 2 == 0 else n - 1\n"
        "         steps += 1\n     return steps\n"
    )
    spec = TaskSpec(
        task_id="hang_0001",
        base_dir=base,
        tests_dir=tests,
        fail_to_pass=(),
        pass_to_pass=(),
        timeout_seconds=timeout,
    )
    return spec, patch


def _validate(task: TaskSpec, patch: str) -> dict[str, object]:
    found = validate(task, STATEMENT, patch, license_allowlist=["MIT"], declared_license="MIT", runs=1, backend="bwrap")
    return {"status": found.status, "f2p": found.fail_to_pass, "p2p": found.pass_to_pass, "checks": found.checks}


def test_the_hanging_test_times_out_alone_and_the_run_reports_the_rest(tmp_path: Path) -> None:
    task, _ = _task(tmp_path, timeout=20)
    with Sandbox(task.base_dir, "bwrap", limits=Limits(wall_seconds=20)) as box:
        (box.workspace / "tests").mkdir()
        (box.workspace / "tests" / "test_collatz.py").write_text(TESTS)
        report = box.run_tests(["tests"], test_timeout=2)
    assert not report.exec.timed_out
    assert report.outcome("tests/test_collatz.py::test_odd") == "failed"
    assert report.timed_out_tests == ["tests/test_collatz.py::test_odd"]
    assert report.passed("tests/test_collatz.py::test_even")
    assert report.passed("tests/test_collatz.py::test_after_the_hang")
    assert "per-test timeout" in report.exec.stdout and report.valid


def test_a_fix_for_an_infinite_loop_makes_a_valid_task(tmp_path: Path) -> None:
    # 8 s a run: the per-test limit (2 s) fails the hanging test and the rest still runs.
    task, patch = _task(tmp_path, timeout=8)
    found = _validate(task, patch)
    assert found["status"] == "valid", [c.reason for c in found["checks"] if not c.ok]  # type: ignore[attr-defined]
    assert found["f2p"] == ["tests/test_collatz.py::test_odd"]
    assert found["p2p"] == ["tests/test_collatz.py::test_after_the_hang", "tests/test_collatz.py::test_even"]


def test_a_base_run_that_times_out_counts_its_unreported_hidden_tests_as_failing_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No per-test limit: the base run meets the run's own limit with the hanging test unreported.
    monkeypatch.setattr("sandbox.per_test_timeout.limit_for", lambda seconds: 0.0)
    task, patch = _task(tmp_path, timeout=4)
    found = _validate(task, patch)
    checks = {c.name: c for c in found["checks"]}  # type: ignore[attr-defined]
    assert found["status"] == "valid", [c.reason for c in checks.values() if not c.ok]
    # test_even passed before the hang (sealed as it ended); the two after it were never reported.
    assert found["p2p"] == ["tests/test_collatz.py::test_even"]
    assert found["f2p"] == ["tests/test_collatz.py::test_after_the_hang", "tests/test_collatz.py::test_odd"]
    assert "timed out" in checks["base_timed_out"].reason and not checks["base_timed_out"].hard


def test_a_slow_teardown_after_a_timed_out_call_is_no_second_failure(tmp_path: Path) -> None:
    # A busy machine can pause a teardown for longer than a millisecond; here a fixture does it.
    # The test's budget is spent by then: the teardown still gets its grace, the report stays whole.
    slow = TESTS.replace(
        "def test_odd():",
        "import time\nimport pytest\n\n\n@pytest.fixture\ndef slow_teardown():\n    yield\n    time.sleep(0.3)\n\n\n"
        "def test_odd(slow_teardown):",
    )
    task, _ = _task(tmp_path, timeout=20)
    with Sandbox(task.base_dir, "bwrap", limits=Limits(wall_seconds=20)) as box:
        (box.workspace / "tests").mkdir()
        (box.workspace / "tests" / "test_collatz.py").write_text(slow)
        report = box.run_tests(["tests"], test_timeout=2)
    assert report.valid, report.exec.stdout[-2000:]
    assert report.timed_out_tests == ["tests/test_collatz.py::test_odd"]
    assert report.passed("tests/test_collatz.py::test_even") and report.passed(
        "tests/test_collatz.py::test_after_the_hang"
    )
