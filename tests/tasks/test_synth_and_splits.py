"""Synthetic bugs that the tests detect, and splits that stay apart."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tasks.models import Task, TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO

pytestmark = pytest.mark.django_db


def test_synth_tasks_yields_twenty_valid_tasks_and_a_combined_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "invledger"
    shutil.copytree(DEMO / "tasks" / "task_0017" / "repo_snapshot", repo)
    call_command(
        "synth_tasks",
        "--repo",
        str(repo),
        "--count",
        "20",
        "--combine",
        "1",
        "--suite",
        "synth",
        "--seed",
        "7",
        "--validate",
        "--runs",
        "1",
        verbosity=0,
    )
    out = capsys.readouterr().out
    tasks = list(Task.objects.filter(suite__name="synth"))
    valid = [t for t in tasks if t.validation_status == "valid"]
    assert len(valid) >= 20, out
    single = [t for t in tasks if len(t.metadata["mutation"]) == 1]
    assert len(single) == 20 and any(len(t.metadata["mutation"]) == 2 for t in tasks)
    for task in single:
        meta = task.metadata["mutation"][0]
        assert task.source == "synthetic_mutation" and task.fail_to_pass
        assert meta["operator"] in task.tags and f"+++ b/{meta['path']}" in task.expected_patch
        assert task.expected_patch not in task.statement
    assert len({t.expected_patch for t in tasks}) == len(tasks)  # no identical mutants
    # The same seed again finds the same tasks in the suite: nothing is built or tested again.
    call_command("synth_tasks", "--repo", str(repo), "--count", "20", "--suite", "synth", "--seed", "7", verbosity=0)
    assert "0 created, 0 updated, 0 unchanged, 20 already built" in capsys.readouterr().out


def test_synth_tasks_refuses_a_repository_whose_tests_fail(tmp_path: Path) -> None:
    repo = tmp_path / "broken"
    shutil.copytree(DEMO / "tasks" / "task_0001" / "repo_snapshot", repo)
    shutil.copy(DEMO / "tasks" / "task_0001" / "tests" / "test_parse_config.py", repo / "tests")
    (repo / "tests" / "test_parse_config.py").write_text("def test_x():\n    assert False\n")
    (repo / "configkit" / "__init__.py").write_text("raise SystemExit(0)\n")
    with pytest.raises(CommandError, match="tests must pass before bugs are injected"):
        call_command("synth_tasks", "--repo", str(repo), "--count", "2", verbosity=0)
    assert not Task.objects.exists()


def test_an_eval_suite_sharing_a_function_or_statement_with_train_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import_task_dirs(DEMO / "tasks" / "task_0001", "train-demo", "train")
    import_task_dirs(DEMO / "tasks" / "task_0013", "train-demo", "train")
    twin = tmp_path / "task_0901"
    shutil.copytree(DEMO / "tasks" / "task_0001", twin)
    (twin / "metadata.json").write_text((twin / "metadata.json").read_text().replace("task_0001", "task_0901"))
    (twin / "task.md").write_text("# Unrelated words here\n\nNothing in common with the train statements at all.\n")
    near = tmp_path / "task_0902"
    shutil.copytree(DEMO / "tasks" / "task_0014", near)
    (near / "metadata.json").write_text((near / "metadata.json").read_text().replace("task_0014", "task_0902"))
    (near / "task.md").write_text((DEMO / "tasks" / "task_0013" / "task.md").read_text() + "\nAlso today.\n")
    clean = DEMO / "tasks" / "task_0008"
    for path in (twin, near, clean):
        import_task_dirs(path, "eval-demo", "eval")
    call_command("check_splits", "--eval", "eval-demo")
    out = capsys.readouterr().out
    assert "task_0901 ~ task_0001: same_function: configkit: configkit/config.py::parse_config" in out
    assert "task_0902 ~ task_0013: similar_statement" in out
    assert "task_0008" not in out
    with pytest.raises(CommandError, match="contaminated"):
        call_command("check_splits", "--eval", "eval-demo", "--strict")
    with pytest.raises(CommandError, match="is a train suite"):
        call_command("check_splits", "--eval", "train-demo")
    assert TaskSuite.objects.get(name="eval-demo").split == "eval"
