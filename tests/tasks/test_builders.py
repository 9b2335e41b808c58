"""Builders turn real repositories into tasks: SWE-bench instances, error logs, git history."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from rewards.scoring import score_patch
from rewards.spec import load_spec
from sandbox import Sandbox
from tasks.models import Task
from tasks.services import task_spec_for, validate_task
from tasks.storage import tree_path
from tests.conftest import DEMO

pytestmark = pytest.mark.django_db
TASK = DEMO / "tasks" / "task_0001"


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def clone_of_demo(dest: Path) -> str:
    shutil.copytree(TASK / "repo_snapshot", dest)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "configkit")
    return git(dest, "rev-parse", "HEAD")


def test_swebench_instances_import_with_a_local_clone(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    base = clone_of_demo(repos / "acme__configkit")
    work = tmp_path / "work"
    shutil.copytree(repos / "acme__configkit", work)
    shutil.copy(TASK / "tests" / "test_parse_config.py", work / "tests" / "test_parse_config.py")
    test_patch = git(work, "diff") + "\n"
    meta = json.loads((TASK / "metadata.json").read_text())
    instance = {
        "instance_id": "acme__configkit-1",
        "repo": "acme/configkit",
        "base_commit": base,
        "patch": (TASK / "expected_patch").read_text(),
        "test_patch": test_patch,
        "problem_statement": (TASK / "task.md").read_text(),
        "FAIL_TO_PASS": json.dumps(meta["fail_to_pass"]),
        "PASS_TO_PASS": meta["pass_to_pass"],
    }
    jsonl = tmp_path / "instances.jsonl"
    jsonl.write_text(json.dumps(instance) + "\n")
    call_command("import_tasks", str(jsonl), "--repos", str(repos), "--suite", "swe", verbosity=0)
    task = Task.objects.get(task_id="acme__configkit-1")
    assert task.source == "issue_pr" and task.base_commit == base and task.fail_to_pass == meta["fail_to_pass"]
    assert score_patch(task_spec_for(task), task.expected_patch, load_spec()).reward == 1.0
    assert score_patch(task_spec_for(task), "", load_spec()).reward <= 0

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**instance, "instance_id": "x-2", "repo": "acme/unknown"}) + "\n")
    with pytest.raises(CommandError, match="no local clone of acme/unknown"):
        call_command("import_tasks", str(bad), "--repos", str(repos), verbosity=0)
    with pytest.raises(CommandError, match="needs --repos"):
        call_command("import_tasks", str(jsonl), verbosity=0)
    assert not Task.objects.filter(task_id="x-2").exists()


def test_an_error_log_becomes_a_task_whose_verifier_is_the_failing_test(tmp_path: Path) -> None:
    repo = tmp_path / "configkit"
    shutil.copytree(TASK / "repo_snapshot", repo)
    shutil.copy(TASK / "tests" / "test_parse_config.py", repo / "tests" / "test_parse_config.py")
    with Sandbox(repo, "bwrap") as box:
        log = box.exec("python -m pytest -q -rA -p no:cacheprovider tests/test_parse_config.py").stdout
    assert "FAILED tests/test_parse_config.py::test_empty_input" in log
    (tmp_path / "ci.log").write_text(log)
    call_command(
        "build_tasks",
        "--from-log",
        str(tmp_path / "ci.log"),
        "--repo",
        str(repo),
        "--suite",
        "logs",
        "--patch",
        str(TASK / "expected_patch"),
        verbosity=0,
    )
    task = Task.objects.get(suite__name="logs")
    assert task.source == "error_log" and "IndexError" in task.statement
    assert task.fail_to_pass == ["tests/test_parse_config.py::test_empty_input"]
    report = validate_task(task, runs=1)
    assert report.status == "valid", [c.reason for c in report.checks if not c.ok]
    with pytest.raises(CommandError, match="names no failing test"):
        (tmp_path / "empty.log").write_text("all good\n")
        call_command("build_tasks", "--from-log", str(tmp_path / "empty.log"), "--repo", str(repo), verbosity=0)


def test_the_demo_history_yields_valid_tasks_from_real_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repos"
    subprocess.run(
        [sys.executable, str(DEMO / "history" / "build_history.py"), str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    for repo in ("configkit", "textstats", "invledger"):
        call_command(
            "build_tasks",
            "--from-git",
            str(out / repo),
            "--issues",
            str(out / f"{repo}.issues.json"),
            "--suite",
            "history",
            "--validate",
            "--runs",
            "1",
            verbosity=0,
        )
    tasks = list(Task.objects.filter(suite__name="history"))
    valid = [t for t in tasks if t.validation_status == "valid"]
    assert len(valid) >= 10, {t.task_id: t.validation_report.get("reasons") for t in tasks if t not in valid}
    # The hardened scorer (admission, hermetic run, canaries, twins) still gives a real
    # commit's own fix full marks.
    spec = load_spec()
    scores = {t.task_id: score_patch(task_spec_for(t), t.expected_patch, spec) for t in valid}
    assert {k: s.reward for k, s in scores.items() if not s.resolved} == {}
    assert {k: [f.detector for f in s.flags] for k, s in scores.items() if s.flags} == {}
    task = next(t for t in tasks if "parse_config" in t.statement and "empty" in t.statement.lower())
    assert task.source == "git_history" and task.tests_dest == "tests"
    parent = git(out / "configkit", "rev-parse", f"{task.task_id.split('-')[1]}^")
    assert task.base_commit == parent and parent[:10] not in task.statement
    stored = tree_path(task.snapshot_hash)
    assert not (stored / ".git").exists()  # no history to mine in the snapshot
    assert [f for f in task.snapshot_files if str(f[0]).startswith(".git/")] == []
    # Commits that touch only docs, only tests, or only code are not tasks.
    subjects = {t.statement.splitlines()[0] for t in tasks}
    assert not any("README" in s or "Add tests for" in s or "helper" in s.lower() for s in subjects)
