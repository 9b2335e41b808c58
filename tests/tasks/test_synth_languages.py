"""Synthetic Go and JavaScript tasks by mutation: a flipped operator that the repository's own tests
notice becomes a task (the mutated tree as the base, the reverse flip as the expected patch, the
killed tests as FAIL_TO_PASS) that validates like any Go or JavaScript task; comments and strings are
never mutated."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sandbox.backends.bwrap import BwrapBackend
from tasks.builders.lang_mutation import code_mask, mutants, synthesize_lang
from tasks.models import Task
from tasks.services import import_task_dirs, validate_task
from tests.conftest import DEMO


def _fixed(task_dir: Path, dest: str, tmp_path: Path) -> Path:
    """The demo task's repository after its fix, with its tests in place: a tree whose tests pass."""
    repo = tmp_path / "repo"
    shutil.copytree(task_dir / "repo_snapshot", repo)
    subprocess.run(["git", "apply", str(task_dir / "expected_patch")], cwd=repo, check=True, capture_output=True)
    (repo / dest).mkdir(exist_ok=True)
    for test in (task_dir / "tests").iterdir():
        shutil.copy(test, repo / dest / test.name)
    return repo


def test_only_code_is_mutated_never_comments_or_strings(tmp_path: Path) -> None:
    text = 'a := x < y // x < y\ns := "x < y" + `x > y`\nif a && b {\n/* p == q */ }\n'
    mask = code_mask(text)
    assert [text[i] for i in range(len(text)) if text[i] in "<>&" and mask[i]] == ["<", "&", "&"]
    (tmp_path / "go.mod").write_text("module example.com/m\n\ngo 1.19\n")
    (tmp_path / "m.go").write_text("package m\n\n" + text)
    (tmp_path / "m_test.go").write_text("package m\n\nvar _ = 1 < 2\n")
    found = mutants(tmp_path, "go")
    assert [(m.path, m.before, m.after) for m in found] == [("m.go", "<", "<="), ("m.go", "&&", "||")]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("task_dir", "dest", "language"),
    [(DEMO / "go_tasks" / "go_0003", "lists", "go"), (DEMO / "js_tasks" / "js_0003", "test", "javascript")],
    ids=["go", "javascript"],
)
def test_a_noticed_mutant_becomes_a_valid_task(task_dir: Path, dest: str, language: str, tmp_path: Path) -> None:
    repo = _fixed(task_dir, dest, tmp_path)
    built = synthesize_lang(repo, language, 1, 7, tmp_path / "out", BwrapBackend(), "demo", max_tries=12)
    assert len(built) == 1, "no mutant among the first 12 was noticed by the tests"
    patch = (built[0] / "expected_patch").read_text()
    assert sum(line.startswith("-") and not line.startswith("---") for line in patch.splitlines()) == 1
    import_task_dirs(built[0], "synth")
    task = Task.objects.get(suite__name="synth")
    assert task.language == language and task.metadata["source"] == "synthetic_mutation"
    report = validate_task(task, runs=1)
    task.refresh_from_db()
    assert report.status == "valid", task.validation_report["reasons"]
    assert task.fail_to_pass and "flip" in " ".join(task.tags)


@pytest.mark.django_db
def test_synth_tasks_on_a_go_repository_builds_and_validates_mutants(tmp_path: Path) -> None:
    repo = _fixed(DEMO / "go_tasks" / "go_0001", "lists", tmp_path)
    args = ("--repo", str(repo), "--count", "1", "--suite", "go-synth", "--validate", "--runs", "1")
    call_command("synth_tasks", *args, verbosity=0, stdout=io.StringIO(), stderr=io.StringIO())
    (task,) = Task.objects.filter(suite__name="go-synth")
    assert task.language == "go" and task.validation_status == "valid", task.validation_report.get("reasons")
    with pytest.raises(CommandError, match="--combine"):
        call_command("synth_tasks", *args, "--combine", "1", verbosity=0, stdout=io.StringIO(), stderr=io.StringIO())
