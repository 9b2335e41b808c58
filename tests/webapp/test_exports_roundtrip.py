"""Import -> export -> import adds nothing and changes nothing: Crucible JSONL, task dirs, SWE-bench JSONL."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from django.core.management import call_command

from tasks.models import Task, TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from tests.tasks.test_builders import clone_of_demo, git
from trajectories.models import Step, Trajectory
from trajectories.services import import_trajectories

pytestmark = pytest.mark.django_db
TASK = DEMO / "tasks" / "task_0001"


def export(tmp_path: Path, *args: str) -> Path:
    suffix = ".tar" if "taskdir" in args else ".jsonl"
    out = tmp_path / f"{args[0]}-{len(list(tmp_path.iterdir()))}{suffix}"
    call_command("export", *args, "--out", str(out), verbosity=0)
    return out


def snapshot() -> list[tuple[object, ...]]:
    return sorted(Task.objects.values_list("task_id", "version", "validation_status", "fail_to_pass"))


def test_crucible_jsonl_round_trips(demo_suite: TaskSuite, tmp_path: Path) -> None:
    first = export(tmp_path, "trajectories")
    count = Trajectory.objects.count()
    assert first.read_bytes().count(b"\n") == count == 7
    again = import_trajectories(first)
    assert (again.created, again.skipped) == (0, count)
    # Into an empty store: the same trajectories, steps and bytes come back.
    Step.objects.all().delete()
    Trajectory.objects.all().delete()
    fresh = import_trajectories(first)
    assert (fresh.created, fresh.skipped) == (count, 0)
    assert export(tmp_path, "trajectories").read_bytes() == first.read_bytes()


def test_task_directories_round_trip_and_are_self_contained(demo_suite: TaskSuite, tmp_path: Path) -> None:
    before = snapshot()
    tarball = export(tmp_path, "tasks", "--format", "taskdir", "--suite", "demo")
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
        validation = json.loads(archive.extractfile("tasks-taskdir/task_0001/validation.json").read())  # type: ignore[union-attr]
        archive.extractall(tmp_path / "out", filter="data")
    assert "tasks-taskdir/task_0001/tests/test_parse_config.py" in names
    assert validation["fail_to_pass"] == Task.objects.get(task_id="task_0001").fail_to_pass
    result = import_task_dirs(tmp_path / "out" / "tasks-taskdir", "demo")
    assert (result.created, result.updated, result.unchanged) == (0, 0, 17)
    assert snapshot() == before
    # The tarball itself is what import_tasks reads.
    call_command("import_tasks", str(tarball), "--suite", "demo", verbosity=0)
    assert snapshot() == before


def test_the_tasks_jsonl_carries_the_computed_lists_the_report_and_the_hidden_tests(
    demo_suite: TaskSuite, tmp_path: Path
) -> None:
    Task.objects.filter(task_id="task_0001").update(
        fail_to_pass=["computed::f2p"], validation_report={"reasons": ["ok"]}
    )
    lines = export(tmp_path, "tasks", "--suite", "demo").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["task_id"] == "task_0001" and first["fail_to_pass"] == ["computed::f2p"]
    assert first["validation_report"] == {"reasons": ["ok"]}
    assert first["hidden_tests"]["test_parse_config.py"] == (TASK / "tests" / "test_parse_config.py").read_text()


def test_swebench_jsonl_round_trips(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    base = clone_of_demo(repos / "acme__configkit")
    work = tmp_path / "work"
    shutil.copytree(repos / "acme__configkit", work)
    shutil.copy(TASK / "tests" / "test_parse_config.py", work / "tests" / "test_parse_config.py")
    meta = json.loads((TASK / "metadata.json").read_text())
    instance = {
        "instance_id": "acme__configkit-1",
        "repo": "acme/configkit",
        "base_commit": base,
        "patch": (TASK / "expected_patch").read_text(),
        "test_patch": git(work, "diff") + "\n",
        "problem_statement": (TASK / "task.md").read_text(),
        "FAIL_TO_PASS": json.dumps(meta["fail_to_pass"]),
        "PASS_TO_PASS": json.dumps(meta["pass_to_pass"]),
        "version": "0.1",
    }
    given = tmp_path / "given.jsonl"
    given.write_text(json.dumps(instance) + "\n")
    call_command("import_tasks", str(given), "--repos", str(repos), "--suite", "swe", verbosity=0)
    before = snapshot()
    exported = export(tmp_path, "tasks", "--format", "swe-bench", "--suite", "swe")
    (out,) = [json.loads(line) for line in exported.read_text().splitlines()]
    assert {k: out[k] for k in instance if k != "test_patch"} == {
        k: v for k, v in instance.items() if k != "test_patch"
    }
    assert out["test_patch"].startswith("diff --git a/tests/test_parse_config.py b/tests/test_parse_config.py")
    call_command("import_tasks", str(exported), "--repos", str(repos), "--suite", "swe", verbosity=0)
    assert snapshot() == before
    assert export(tmp_path, "tasks", "--format", "swe-bench", "--suite", "swe").read_bytes() == exported.read_bytes()
