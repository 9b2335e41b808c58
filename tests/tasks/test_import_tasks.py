from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tasks.models import Task, TaskSuite
from tasks.services import import_task_dirs
from tasks.storage import tree_path
from tasks.taskdir import TaskDirError
from tests.conftest import DEMO
from tests.helpers import db_state

pytestmark = pytest.mark.django_db


def test_it_imports_a_task_dir_with_every_metadata_field(task_dir: Path) -> None:
    result = import_task_dirs(task_dir, "guide")
    assert (result.created, result.updated, result.unchanged) == (1, 0, 0)
    task = Task.objects.get(task_id="task_0001")
    meta = json.loads((task_dir / "metadata.json").read_text())
    assert task.suite.name == "guide"
    assert task.statement == (task_dir / "task.md").read_text()
    assert task.expected_patch == (task_dir / "expected_patch").read_text()
    assert task.fail_to_pass == meta["fail_to_pass"] and task.pass_to_pass == meta["pass_to_pass"]
    assert task.test_command == meta["test_command"] and task.repo == meta["repo"]
    assert task.metadata == meta
    assert task.version.startswith("sha256:")
    assert task.validation_status == Task.Validation.UNVALIDATED


def test_it_stores_the_snapshot_and_tests_by_content_hash(task_dir: Path) -> None:
    import_task_dirs(task_dir, "guide")
    task = Task.objects.get(task_id="task_0001")
    stored = tree_path(task.snapshot_hash)
    originals = sorted(
        p.relative_to(task_dir / "repo_snapshot").as_posix()
        for p in (task_dir / "repo_snapshot").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert sorted(p.relative_to(stored).as_posix() for p in stored.rglob("*") if p.is_file()) == originals
    assert [f[0] for f in task.snapshot_files] == originals
    assert any(p.name.startswith("test_") for p in tree_path(task.tests_hash).rglob("*.py"))


def test_reimporting_the_same_dir_changes_nothing(task_dir: Path) -> None:
    import_task_dirs(task_dir, "guide")
    before = db_state()
    result = import_task_dirs(task_dir, "guide")
    assert (result.created, result.updated, result.unchanged) == (0, 0, 1)
    assert db_state() == before


def test_a_changed_task_gets_a_new_version_and_loses_its_validation(task_dir: Path) -> None:
    import_task_dirs(task_dir, "guide")
    Task.objects.filter(task_id="task_0001").update(validation_status="valid")
    old = Task.objects.get(task_id="task_0001").version
    (task_dir / "repo_snapshot" / "NOTES.txt").write_text("new file\n")
    result = import_task_dirs(task_dir, "guide")
    task = Task.objects.get(task_id="task_0001")
    assert result.updated == 1
    assert task.version != old
    assert task.validation_status == Task.Validation.UNVALIDATED


def test_it_imports_the_whole_demo_folder() -> None:
    result = import_task_dirs(DEMO / "tasks", "demo")
    assert result.created >= 12
    assert TaskSuite.objects.get(name="demo").tasks.count() == result.created


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda d: (d / "task.md").unlink(), "task.md is missing"),
        (lambda d: (d / "metadata.json").write_text("{not json"), "metadata.json is not valid JSON"),
        (lambda d: (d / "metadata.json").write_text("[1, 2]"), "must hold a JSON object"),
        (lambda d: (d / "metadata.json").write_text('{"source": "handwritten"}'), "task_id"),
        (lambda d: (d / "metadata.json").write_text('{"task_id": "../etc"}'), "task_id"),
        (
            lambda d: (d / "metadata.json").write_text('{"task_id": "t1", "fail_to_pass": "tests/x.py::t"}'),
            "fail_to_pass must be a list of strings",
        ),
        (
            lambda d: (d / "metadata.json").write_text('{"task_id": "t1", "timeout_seconds": -3}'),
            "timeout_seconds must be a positive integer",
        ),
        (lambda d: (d / "metadata.json").write_text('{"task_id": "t1", "source": "scraped"}'), "source"),
        (lambda d: (d / "metadata.json").write_text('{"task_id": "t1", "tests_dest": "../../x"}'), "tests_dest"),
        (lambda d: os.symlink("/etc/passwd", d / "repo_snapshot" / "passwd"), "symbolic links are not allowed"),
        (lambda d: (d / "task.md").write_bytes(b"\xff\xfe bad"), "not UTF-8"),
    ],
)
def test_a_bad_task_dir_is_refused_with_a_clear_error_and_nothing_written(
    tmp_path: Path, task_dir: Path, breakage: object, message: str
) -> None:
    import_task_dirs(DEMO / "tasks" / "task_0002", "guide")  # something already there
    folder = tmp_path / "batch"
    folder.mkdir()
    task_dir.rename(folder / "task_0001")
    (folder / "task_0003").symlink_to(DEMO / "tasks" / "task_0003", target_is_directory=True)
    breakage(folder / "task_0001")  # type: ignore[operator]
    before = db_state()
    with pytest.raises(CommandError, match=message):
        call_command("import_tasks", str(folder), "--suite", "guide", verbosity=0)
    assert db_state() == before


def test_a_task_cannot_silently_move_between_suites(task_dir: Path) -> None:
    import_task_dirs(task_dir, "one")
    with pytest.raises(TaskDirError, match="already belongs to suite 'one'"):
        import_task_dirs(task_dir, "two")


def test_the_command_reports_what_it_did(task_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_tasks", str(task_dir), "--suite", "guide", "--split", "eval")
    assert "1 created" in capsys.readouterr().out
    assert TaskSuite.objects.get(name="guide").split == "eval"


def test_a_missing_path_is_a_clear_error() -> None:
    with pytest.raises(CommandError, match="no such file or directory"):
        call_command("import_tasks", "/nonexistent/tasks", verbosity=0)
