from __future__ import annotations

import json
import shutil
from pathlib import Path

from sandbox import Sandbox
from sandbox.junit import nodeid
from tests.sandbox.conftest import DEMO_TASK


def hidden_tests_in(box: Sandbox) -> None:
    shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)


def test_it_reports_each_test_by_node_id_and_agrees_with_pytest(box: Sandbox) -> None:
    meta = json.loads((DEMO_TASK / "metadata.json").read_text())
    hidden_tests_in(box)
    report = box.run_tests()
    assert report.valid, report.inconsistencies
    assert report.exec.exit_code == 1
    for test in meta["fail_to_pass"]:
        assert report.outcome(test) == "failed"
    for test in meta["pass_to_pass"]:
        assert report.outcome(test) == "passed"
    assert report.outcome("tests/test_nope.py::test_missing") == "missing"
    assert all(t.duration_s >= 0 for t in report.tests.values())

    box.apply_patch((DEMO_TASK / "expected_patch").read_text())
    fixed = box.run_tests()
    assert fixed.valid and fixed.exec.exit_code == 0
    assert all(fixed.outcome(t) == "passed" for t in meta["fail_to_pass"] + meta["pass_to_pass"])


def test_node_ids_cover_classes_and_parameters() -> None:
    assert nodeid("tests/test_x.py", "tests.test_x", "test_a[1-2]") == "tests/test_x.py::test_a[1-2]"
    assert nodeid("tests/test_x.py", "tests.test_x.TestC", "test_b") == "tests/test_x.py::TestC::test_b"
    assert nodeid("test_top.py", "test_top", "test_c") == "test_top.py::test_c"


def test_a_run_that_lies_about_its_exit_status_is_flagged(box: Sandbox) -> None:
    hidden_tests_in(box)
    (box.workspace / "conftest.py").write_text(
        "def pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n"
    )
    report = box.run_tests()
    assert report.exec.exit_code == 0
    assert not report.valid
    assert any("exited 0 but the report has" in p for p in report.inconsistencies)


def test_a_missing_report_is_flagged(box: Sandbox) -> None:
    (box.workspace / "conftest.py").write_text("import os\ndef pytest_configure(config):\n    os._exit(0)\n")
    report = box.run_tests()
    assert not report.valid
    assert "no JUnit report was written" in report.inconsistencies


def test_the_report_path_is_outside_the_workspace_and_new_each_run(box: Sandbox) -> None:
    (box.workspace / "tests" / "test_argv.py").write_text(
        "import sys\ndef test_argv():\n    print('ARGV', sys.argv)\n    assert True\n"
    )
    paths = []
    for _ in range(2):
        report = box.run_tests(["-s", "tests/test_argv.py"])
        arg = next(a for a in report.exec.stdout.split() if "--junitxml=" in a)
        paths.append(arg.split("=", 1)[1].strip("',]"))
    assert paths[0] != paths[1]
    assert all(not p.startswith("/workspace") for p in paths)
    assert not list(Path(box.workspace).rglob("report.xml"))
