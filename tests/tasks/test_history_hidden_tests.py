"""Which files a history task hides as its tests, and which of them validation runs: the data its
tests read, the test modules a repository's pytest settings name, and a broken test file that is
not the task's."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command

from tasks.builders import git_history
from tasks.models import Task, TaskSuite
from tests.tasks.test_builders_history import commit

pytestmark = pytest.mark.django_db
WORDS = "def shout(text):\n    return text.upper()\n"
# Data-driven, as tomli's suite is: one sub-test per file under tests/cases.
CASES = """import unittest
from pathlib import Path

from pkg.words import shout


class Cases(unittest.TestCase):
    def test_every_case(self):
        for path in sorted((Path(__file__).parent / "cases").glob("*.txt")):
            with self.subTest(msg=path.stem):
                given, expected = path.read_text().rstrip("\\n").split("|")
                self.assertEqual(shout(given), expected)
"""
TEST_WORDS = "from pkg.words import shout\n\n\ndef test_plain():\n    assert shout('a') == 'A'\n"


def _build(repo: Path, suite: str) -> dict[str, Task]:
    call_command("build_tasks", "--from-git", str(repo), "--suite", suite, "--validate", "--runs", "1", verbosity=0)
    return {t.task_id.rsplit("-", 1)[1]: t for t in Task.objects.filter(suite=TaskSuite.objects.get(name=suite))}


def _start(repo: Path) -> None:
    commit(repo, "Start", {
        "LICENSE": "Permission is hereby granted, free of charge\n",
        "pkg/__init__.py": "",
        "pkg/words.py": WORDS,
        "tests/__init__.py": "",
        "tests/test_cases.py": CASES,
        "tests/test_words.py": TEST_WORDS,
        "tests/cases/hello.txt": "hi|HI\n",
        # Needs a git submodule the clone lacks: it can never be collected, and is no task's.
        "tests/test_external.py": "import toml_test_suite_never_cloned\n",
    })  # fmt: skip


def test_a_data_file_beside_the_tests_is_hidden_with_them(tmp_path: Path) -> None:
    repo = tmp_path / "words"
    _start(repo)
    data = commit(repo, "Shout drops the spaces around words", {
        "pkg/words.py": WORDS.replace("text.upper()", "text.strip().upper()"),
        "tests/cases/padded.txt": "  yo |YO\n",
    })  # fmt: skip
    (found,) = git_history.candidates(repo)
    assert found.test_files == ("tests/cases/padded.txt",) and found.code_files == ("pkg/words.py",)
    built = git_history.build_task(repo, found, tmp_path / "out", {}, "acme/words")
    # Hidden from the agent (its snapshot is the parent's), put back before each run.
    assert not (built / "repo_snapshot" / "tests" / "cases" / "padded.txt").exists()
    assert (built / "tests" / "padded.txt").read_text() == "  yo |YO\n"
    # No hidden test module: the whole suite runs, and the broken file in it is not the task's.
    task = _build(repo, "words")[data[:10]]
    assert task.validation_status == "valid", task.validation_report["reasons"]
    assert task.fail_to_pass == ["tests/test_cases.py::Cases::test_every_case"]


def test_validation_runs_the_hidden_test_modules_alone(tmp_path: Path) -> None:
    repo = tmp_path / "words"
    _start(repo)
    module = commit(repo, "Shout ends with a mark when asked", {
        "pkg/words.py": WORDS.replace("(text)", "(text, mark='')").replace("text.upper()", "text.upper() + mark"),
        "tests/test_words.py": TEST_WORDS + "\n\ndef test_mark():\n    assert shout('a', '!') == 'A!'\n",
    })  # fmt: skip
    broken = commit(repo, "Shout in another module", {
        "pkg/words.py": WORDS + "\n\nLOUD = True\n",
        "tests/test_words.py": "from pkg.loud import shout\n\n\ndef test_plain():\n    assert shout('a') == 'A'\n",
    })  # fmt: skip
    # Tests only (no candidate): the newest commit's suite passes the repository gate again.
    commit(repo, "Test the old module again", {"tests/test_words.py": TEST_WORDS})
    tasks = _build(repo, "modules")
    assert tasks[module[:10]].validation_status == "valid", tasks[module[:10]].validation_report["reasons"]
    # Neither the broken file nor the data-driven one is collected.
    assert tasks[module[:10]].fail_to_pass == ["tests/test_words.py::test_mark"]
    assert tasks[module[:10]].pass_to_pass == ["tests/test_words.py::test_plain"]
    # A hidden test that cannot be imported with the expected patch still sinks its task.
    (reason,) = tasks[broken[:10]].validation_report["reasons"]
    assert reason.startswith("tests cannot be collected with the expected patch: tests/test_words.py: ")
    assert "test_external" not in reason


def test_a_test_module_named_by_the_pytest_settings_is_a_test(tmp_path: Path) -> None:
    repo = tmp_path / "checked"
    settings = '[tool.pytest.ini_options]\ntestpaths = ["checks"]\npython_files = ["check_*.py"]\n'
    check = "from pkg.words import shout\n\n\ndef test_shout():\n    assert shout(' a ') == 'A'\n"
    commit(repo, "Start", {
        "LICENSE": "Permission is hereby granted, free of charge\n",
        "pyproject.toml": settings,
        "pkg/__init__.py": "",
        "pkg/words.py": WORDS,
        "checks/check_words.py": "from pkg.words import shout\n\n\ndef test_plain():\n    assert shout('a') == 'A'\n",
    })  # fmt: skip
    fix = commit(repo, "Shout drops the spaces around words", {
        "pkg/words.py": WORDS.replace("text.upper()", "text.strip().upper()"),
        "checks/check_words.py": check,
    })  # fmt: skip
    (candidate,) = git_history.candidates(repo)
    assert candidate.test_files == ("checks/check_words.py",) and candidate.code_files == ("pkg/words.py",)
    task = _build(repo, "checked")[fix[:10]]
    assert task.validation_status == "valid", task.validation_report["reasons"]
    assert task.fail_to_pass == ["checks/check_words.py::test_shout"]
