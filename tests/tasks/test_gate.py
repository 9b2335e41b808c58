"""One gate per repository: its suite, run once at the newest commit, lets a build go on or stops
it with one diagnosis (what failed, the commonest errors, what would fix it), never fifteen copies
of the same failure, one per candidate."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tasks.gate import judge
from tasks.models import Task, TaskSuite
from tests.tasks.test_builders_history import commit

pytestmark = pytest.mark.django_db
CODE = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 1) == 2\n"
LICENSE = "Permission is hereby granted, free of charge\n"


def _repo(tmp_path: Path, tests: dict[str, str]) -> Path:
    repo = tmp_path / "calc"
    commit(repo, "Start", {"LICENSE": LICENSE, "calc.py": CODE, "tests/test_add.py": TEST})
    commit(repo, "Fix add\n\nadd(1, 1) gave 0.", {"calc.py": FIXED, **tests})
    return repo


def _build(repo: Path, *extra: str) -> str:
    err = io.StringIO()
    call_command("build_tasks", "--from-git", str(repo), "--suite", "gated", "--env", "none", *extra,
                 stdout=io.StringIO(), stderr=err)  # fmt: skip
    return err.getvalue()


def test_a_suite_that_mostly_fails_at_its_newest_commit_stops_the_build_with_one_diagnosis(tmp_path: Path) -> None:
    broken = "import not_installed_here\n\n\ndef test_{n}():\n    assert not_installed_here\n"
    repo = _repo(tmp_path, {f"tests/test_more_{n}.py": broken.format(n=n) for n in range(4)})
    with pytest.raises(CommandError) as refused:
        _build(repo)
    text = str(refused.value)
    assert "the repository gate failed; no task was built" in text and "20% of the tests pass" in text
    assert "4x " in text and "not_installed_here" in text  # the commonest error, counted once for all
    assert "import 'not_installed_here', which the environment lacks" in text and "--skip-gate" in text
    assert not Task.objects.exists()
    gate = TaskSuite.objects.get(name="gated").build_report["gate"]
    assert gate["passed"] is False and gate["outcomes"] == {"collection_error": 4, "passed": 1}
    # Overridden, the build goes on and says the gate was skipped.
    assert "repository gate skipped" in _build(repo, "--skip-gate")
    assert Task.objects.filter(suite__name="gated").count() == 1


def test_a_suite_that_passes_lets_the_build_go_on_and_the_report_keeps_the_gate(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"tests/test_add.py": TEST + "\n\ndef test_add_again():\n    assert add(2, 2) == 4\n"})
    err = _build(repo)
    assert "repository gate at" in err and ": passed (2 passed; 100% passed;" in err
    report = TaskSuite.objects.get(name="gated").build_report
    assert report["gate"]["passed"] and report["built"] == 1


def test_the_diagnosis_names_a_missing_fixture_plugin_and_a_threshold_can_be_asked_for() -> None:
    from sandbox.results import ExecResult, Outcome, TestOutcome, TestReport

    tests = {f"t.py::test_{n}": TestOutcome(f"t.py::test_{n}", Outcome.ERROR, message="fixture 'mocker' not found")
             for n in range(3)} | {"t.py::ok": TestOutcome("t.py::ok", Outcome.PASSED)}  # fmt: skip
    report = TestReport(exec=ExecResult(exit_code=1, stdout="", stderr=""), tests=tests)
    gate = judge(report, "abc1234567", min_pass_share=0.5)
    assert not gate.passed and gate.errors == [("fixture 'mocker' not found", 3)]
    assert any("pytest-mock" in hint for hint in gate.hints)
    assert judge(report, "abc1234567", min_pass_share=0.25).passed


def test_the_suite_page_shows_the_gate_and_its_diagnosis_escaped(tmp_path: Path, researcher: object) -> None:
    from tests.conftest import client_for

    hostile = "import not_installed_here  # <script>alert(1)</script>\n\n\ndef test_x():\n    pass\n"
    repo = _repo(tmp_path, {f"tests/test_more_{n}.py": hostile for n in range(4)})
    with pytest.raises(CommandError):
        _build(repo)
    page = client_for(researcher).get("/tasks/gated/").content.decode()  # type: ignore[arg-type]
    assert 'id="repository-gate"' in page and "failed, no task built" in page
    assert "not_installed_here" in page and "<script>alert(1)</script>" not in page
