"""Real history: three chosen sqlparse commits (BSD-3-Clause; tests/fixtures/real-repos/README.md).

Since 2024 sqlparse's suite has a test that XPASSes (`test_issue484_comments_and_newlines`).
JUnit reports it as a pass, pytest's summary as "xpassed": before the one outcome reader, the
cross-check called every run inconsistent and scoring gave the expected patch less than the
empty one. The full newest-40 build is `make bench` (bench/real_history.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from rewards.scoring import score_patch
from rewards.spec import load_spec
from tasks.builders import statements
from tasks.models import Task, TaskSuite
from tasks.services import task_spec_for

pytestmark = pytest.mark.django_db
BUNDLE = Path(__file__).resolve().parents[1] / "fixtures" / "real-repos" / "sqlparse.bundle"
# a194d31 "Keep keyword before leading-dot float literal" (its tests are test_regressions.py, where
# the XPASS is), 53ff44b "Escape backslashes in output formatters." .. 519e416 "Pair comment/dollar-quote ..."
OLDEST, NEWEST = "a194d3187b04b0aed7a935c3401f068236fb6264", "519e41698a172add8aa7b54ab4e94daad0af213e"
XPASS = "tests/test_regressions.py::test_issue484_comments_and_newlines"


def test_chosen_sqlparse_commits_validate_and_their_fixes_score_one(tmp_path: Path) -> None:
    clone = tmp_path / "sqlparse"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(clone)], check=True, capture_output=True, timeout=120)
    call_command(
        "build_tasks",
        "--from-git",
        str(clone),
        "--rev-range",
        f"{OLDEST}^..{NEWEST}",
        "--repo-name",
        "andialbrecht/sqlparse",
        "--suite",
        "sqlparse",
        "--validate",
        "--runs",
        "1",
        verbosity=0,
    )
    report = TaskSuite.objects.get(name="sqlparse").build_report
    assert report["built"] == 3 and report["valid"] == 3, report
    spec = load_spec()
    ran = []
    for task in Task.objects.filter(suite__name="sqlparse"):
        assert task.repo == "andialbrecht/sqlparse" and task.task_id.startswith("andialbrecht__sqlparse-")
        checks = {c["name"]: c for c in task.validation_report["checks"]}
        # Where its file ran (validation runs the hidden test files), the XPASS is read as one and
        # kept out of both lists; the runs are trusted.
        ran_it = any(node.startswith("tests/test_regressions.py::") for node in task.pass_to_pass)
        assert (XPASS in checks["xfail_excluded"]["evidence"]) is ran_it
        ran.append(ran_it)
        assert XPASS not in task.fail_to_pass + task.pass_to_pass and checks["reward_separates"]["ok"]
        expected = score_patch(task_spec_for(task), task.expected_patch, spec)
        assert (expected.reward, expected.flags) == (1.0, []), [(f.detector, f.evidence) for f in expected.flags]
        assert score_patch(task_spec_for(task), "", spec).reward <= 0
        quality = statements.quality(task.statement, task.expected_patch)
        assert quality["empty_shells"] == [] and quality["leaks"] == []
    assert any(ran)  # a194d31 hides test_regressions.py
