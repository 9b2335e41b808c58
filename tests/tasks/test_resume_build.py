"""A build run again after an interruption (or with a larger --max / --count) does only what is left:
tasks the suite holds are not built again, tasks validated before are not validated again, and the
build report counts the whole build."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tasks import validation_pool
from tasks.builders import git_history, synthetic
from tasks.models import Task, TaskSuite
from tests.conftest import DEMO
from tests.tasks.test_builders_history import history  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db
COLLECT = "tests cannot be collected with the expected patch"


class Counting:
    """Wraps a function, keeping its `argument`-th argument of every call; a Ctrl-C at call `stop_at`."""

    def __init__(self, real: Callable[..., Any], argument: int = 0, stop_at: int = 0) -> None:
        self.real, self.argument, self.stop_at = real, argument, stop_at
        self.calls: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(args[self.argument])
        if len(self.calls) == self.stop_at:
            raise KeyboardInterrupt
        return self.real(*args, **kwargs)


def build(repo: str, *extra: str) -> None:
    call_command(
        "build_tasks",
        "--from-git",
        repo,
        "--suite",
        "calc",
        "--validate",
        "--runs",
        "1",
        "--jobs",
        "1",
        *extra,
        verbosity=0,
    )


def test_a_larger_build_after_a_smaller_one_builds_and_validates_only_the_rest(
    history: dict[str, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    build(history["repo"], "--max", "2")  # the newest two: one task (uncollectable), one skip (python2)
    first = Task.objects.get(suite__name="calc")
    assert first.validation_status == "invalid"
    validations = Counting(validation_pool.validate_task)
    builds = Counting(git_history.build_task, argument=1)
    monkeypatch.setattr(validation_pool, "validate_task", validations)
    monkeypatch.setattr(git_history, "build_task", builds)
    capsys.readouterr()
    build(history["repo"], "--max", "5")
    assert sorted(c.commit for c in builds.calls) == sorted([history["rename"], history["new_function"]])
    assert sorted(t.task_id for t in validations.calls) == sorted(
        f"acme__calc-{history[k][:10]}" for k in ("rename", "new_function")
    )
    again = Task.objects.get(task_id=first.task_id)
    assert again.updated_at == first.updated_at and again.validation_report == first.validation_report
    report = TaskSuite.objects.get(name="calc").build_report
    assert (report["candidates"], report["built"], report["already_built"]) == (5, 3, 1)
    assert (report["validated"], report["already_validated"], report["valid"]) == (3, 1, 2)
    assert report["invalid_by_reason"] == {COLLECT: 1}  # the earlier result still counts
    assert len(report["skipped"]) == 2
    assert "5 candidate(s) -> 3 built (1 already built) -> 2 valid of 3 validated (1 validated before)" in (
        capsys.readouterr().out
    )


def test_a_build_stopped_while_validating_resumes_where_it_stopped(
    history: dict[str, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stopped = Counting(validation_pool.validate_task, stop_at=2)
    monkeypatch.setattr(validation_pool, "validate_task", stopped)
    with pytest.raises(KeyboardInterrupt):
        build(history["repo"])
    statuses = dict(Task.objects.filter(suite__name="calc").values_list("task_id", "validation_status"))
    assert len(statuses) == 3 and sorted(statuses.values()).count("unvalidated") == 2
    # What it did is on the suite already: one task validated of three built.
    partial = TaskSuite.objects.get(name="calc").build_report
    assert partial["built"] == 3 and partial["validated"] == 1

    builds = Counting(git_history.build_task, argument=1)
    monkeypatch.setattr(git_history, "build_task", builds)
    resumed = Counting(stopped.real)
    monkeypatch.setattr(validation_pool, "validate_task", resumed)
    build(history["repo"])
    assert builds.calls == []
    left = [task_id for task_id, status in statuses.items() if status == "unvalidated"]
    assert sorted(t.task_id for t in resumed.calls) == sorted(left)
    report = TaskSuite.objects.get(name="calc").build_report
    assert (report["candidates"], report["built"], report["already_built"]) == (5, 3, 3)
    assert (report["validated"], report["already_validated"], report["valid"]) == (3, 1, 2)

    everything = Counting(stopped.real)
    monkeypatch.setattr(validation_pool, "validate_task", everything)
    build(history["repo"], "--revalidate")
    assert len(everything.calls) == 3
    assert TaskSuite.objects.get(name="calc").build_report["already_validated"] == 0


def test_synth_tasks_run_again_with_a_larger_count_tests_only_new_mutants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "invledger"
    shutil.copytree(DEMO / "tasks" / "task_0017" / "repo_snapshot", repo)
    args = ["synth_tasks", "--repo", str(repo), "--suite", "synth", "--seed", "7"]
    call_command(*args, "--count", "2", verbosity=0)
    first = set(Task.objects.filter(suite__name="synth").values_list("task_id", flat=True))
    assert len(first) == 2
    tried_first = TaskSuite.objects.get(name="synth").build_report["candidates"]
    detected = Counting(synthetic.detect, argument=1)
    monkeypatch.setattr(synthetic, "detect", detected)
    call_command(*args, "--count", "3", verbosity=0)
    # Only mutants not kept before ran the tests: the two kept ones were taken from the suite.
    assert not {synthetic.task_id_for("invledger", mutants) for mutants in detected.calls} & first
    tasks = set(Task.objects.filter(suite__name="synth").values_list("task_id", flat=True))
    assert first < tasks and len(tasks) == 3
    report = TaskSuite.objects.get(name="synth").build_report
    assert report["built"] == 3 and report["already_built"] == 2 and report["candidates"] > tried_first
    assert len(detected.calls) == report["candidates"] - 2


def test_a_build_stopped_while_building_keeps_what_it_built_and_resumes(
    history: dict[str, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ctrl-C as the second task is being built: the first is already in the suite.
    stopped = Counting(git_history.build_task, argument=1, stop_at=2)
    monkeypatch.setattr(git_history, "build_task", stopped)
    with pytest.raises(KeyboardInterrupt):
        build(history["repo"])
    kept = list(Task.objects.filter(suite__name="calc").values_list("task_id", flat=True))
    assert kept == [f"acme__calc-{stopped.calls[0].commit[:10]}"]

    builds = Counting(stopped.real, argument=1)
    monkeypatch.setattr(git_history, "build_task", builds)
    build(history["repo"])
    assert stopped.calls[0].commit not in [c.commit for c in builds.calls]
    assert len(builds.calls) == 2  # the other two tasks, built once each
    report = TaskSuite.objects.get(name="calc").build_report
    assert (report["candidates"], report["built"], report["already_built"]) == (5, 3, 1)


def test_building_again_with_other_environment_options_builds_every_task_again(
    history: dict[str, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # How a broken environment is repaired: the same build with another --pytest, --test-env or
    # --env. A resume that kept "already built" tasks would keep their broken environments.
    build(history["repo"], "--max", "3")
    builds = Counting(git_history.build_task, argument=1)
    monkeypatch.setattr(git_history, "build_task", builds)
    build(history["repo"], "--max", "3", "--env", "none")
    rebuilt = len(builds.calls)
    assert rebuilt == Task.objects.filter(suite__name="calc").count() > 0
    assert TaskSuite.objects.get(name="calc").build_report["already_built"] == 0
    build(history["repo"], "--max", "3", "--env", "none")  # the same options again: a resume
    assert len(builds.calls) == rebuilt
    assert TaskSuite.objects.get(name="calc").build_report["already_built"] == rebuilt
