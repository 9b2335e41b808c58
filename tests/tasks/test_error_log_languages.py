"""Error-log tasks from a Go or JavaScript repository: the failing tests are read from the runner's
own output (tests/fixtures/lang_logs/, real runs), the task names its language and hides the test
files those tests live in, and it validates like any Go or JavaScript task: the logged tests fail on
the base and pass with the fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasks.builders import error_log, lang_logs
from tasks.builders.common import BuildError
from tasks.models import Task
from tasks.services import import_task_dirs, validate_task
from tests.conftest import DEMO

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "lang_logs"
LANG_TASKS = Path(__file__).resolve().parents[1] / "fixtures" / "lang_tasks"
GO_ID = "example.com/numkit/lists::TestChunkKeepsTheRemainder"


def test_each_runners_output_gives_the_failing_tests_in_its_ids() -> None:
    go = (LOGS / "go_test.txt").read_text()
    assert lang_logs.failing_ids(go, "go") == [GO_ID]
    assert lang_logs.failing_ids((LOGS / "go_test_json.txt").read_text(), "go") == [GO_ID]
    assert lang_logs.failing_ids((LOGS / "vitest.txt").read_text(), "javascript") == [
        "test/kit.test.js::paginate > returns a short last page",
        "test/kit.test.js::paginate > returns the first page",
    ]
    jest = (LOGS / "jest.txt").read_text()
    assert lang_logs.failing_ids(jest, "javascript") == ["test/cents.test.js::formatCents > pads cents below ten"]
    # Hostile text names nothing: a test line with no package line after it, a sub-test, a huge line.
    noise = "--- FAIL: TestOrphan (0.00s)\n    --- FAIL: TestX/sub (0.00s)\n" + "x" * 100_000 + "\n"
    assert lang_logs.failing_ids(noise, "go") == []


def _repo(snapshot: Path, tests: Path, dest: str, tmp_path: Path) -> Path:
    """The repository the log came from: the base with the failing tests in place."""
    repo = tmp_path / "repo"
    shutil.copytree(snapshot, repo)
    (repo / dest).mkdir(exist_ok=True)
    for test in tests.iterdir():
        shutil.copy(test, repo / dest / test.name)
    return repo


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("task_dir", "dest", "log", "listed", "hidden"),
    [
        (DEMO / "go_tasks" / "go_0001", "lists", "go_test.txt", [GO_ID], "lists/lists_test.go"),
        (
            LANG_TASKS / "js_jest_task_1",
            "test",
            "jest.txt",
            ["test/cents.test.js::formatCents > pads cents below ten"],
            "test/cents.test.js",
        ),
    ],
    ids=["go", "jest"],
)
def test_a_failing_runs_log_becomes_a_valid_task_of_its_language(
    task_dir: Path, dest: str, log: str, listed: list[str], hidden: str, tmp_path: Path
) -> None:
    repo = _repo(task_dir / "repo_snapshot", task_dir / "tests", dest, tmp_path)
    patch = (task_dir / "expected_patch").read_text()
    built = error_log.build_task(repo, (LOGS / log).read_text(), tmp_path / "out", expected_patch=patch)
    # Hidden under tests_dest (a Go package's folder; a JavaScript repository's root), as the runner
    # finds them; the repository keeps its copy, as a Python log's task does: the hidden one goes over it.
    inside = Path(hidden).name if hidden.endswith(".go") else hidden
    assert (built / "tests" / inside).read_bytes() == (repo / hidden).read_bytes()
    import_task_dirs(built, "logs")
    task = Task.objects.get(suite__name="logs")
    assert task.language == ("go" if log.startswith("go") else "javascript")
    assert task.fail_to_pass == listed and task.metadata["source"] == "error_log"
    report = validate_task(task, runs=1)
    task.refresh_from_db()
    assert report.status == "valid", task.validation_report["reasons"]
    assert set(listed) <= set(task.fail_to_pass)


def test_a_log_that_names_no_failing_test_is_refused_in_its_runners_terms(tmp_path: Path) -> None:
    task_dir = DEMO / "go_tasks" / "go_0001"
    repo = _repo(task_dir / "repo_snapshot", task_dir / "tests", "lists", tmp_path)
    with pytest.raises(BuildError, match="--- FAIL: TestX"):
        error_log.build_task(repo, "FAILED tests/test_x.py::test_y\n", tmp_path / "out")
    with pytest.raises(BuildError, match="not in module"):
        error_log.build_task(repo, "--- FAIL: TestA (0.00s)\nFAIL\tevil.com/x\t0.1s\n", tmp_path / "out")
    # A log is hostile text: a test file outside the repository is never read into the task.
    js = LANG_TASKS / "js_jest_task_1"
    js_repo = _repo(js / "repo_snapshot", js / "tests", "test", tmp_path / "js")
    (tmp_path / "js" / "secret.test.js").write_text("stolen")
    log = "FAIL ../secret.test.js\n  ● steals\n"
    with pytest.raises(BuildError, match="outside the repository"):
        error_log.build_task(js_repo, log, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
