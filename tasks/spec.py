"""What running a task's tests needs to know of it, and running them.

Plain Python, no Django: scoring, validation, builders, a remote worker and a training
subprocess all build a `TaskSpec` (from a Task row, see `tasks.services.task_spec_for`,
or from a task directory on disk) and run the hidden tests the same way.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from sandbox import Limits, Sandbox
from sandbox.backends.base import Backend
from sandbox.names import DEFAULT_BACKEND
from sandbox.results import TestReport

DEFAULT_TEST_COMMAND = "python -m pytest"
DEFAULT_TESTS_DEST = "tests"
DEFAULT_TIMEOUT_SECONDS = 120


@dataclass(frozen=True, kw_only=True)
class TaskSpec:
    task_id: str
    base_dir: Path
    tests_dir: Path
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    tests_dest: str = DEFAULT_TESTS_DEST
    test_command: str = DEFAULT_TEST_COMMAND
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS

    @classmethod
    def from_task_dir(cls, path: Path, timeout_seconds: int | None = None) -> TaskSpec:
        """From a task directory (the task format of docs/formats.md) on disk, no database needed."""
        meta = json.loads((path / "metadata.json").read_text())
        return cls(
            task_id=meta["task_id"],
            base_dir=path / "repo_snapshot",
            tests_dir=path / "tests",
            fail_to_pass=tuple(meta.get("fail_to_pass", [])),
            pass_to_pass=tuple(meta.get("pass_to_pass", [])),
            tests_dest=meta.get("tests_dest", DEFAULT_TESTS_DEST),
            test_command=meta.get("test_command", DEFAULT_TEST_COMMAND),
            timeout_seconds=timeout_seconds or meta.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS),
        )


def copy_hidden_tests(box: Sandbox, task: TaskSpec) -> None:
    """Hidden tests go in last, over anything the agent left at those paths."""
    dest = box.workspace / task.tests_dest
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(task.tests_dir, dest, dirs_exist_ok=True)


def run_task_tests(
    task: TaskSpec,
    patch: str | None,
    backend: Backend | str = DEFAULT_BACKEND,
    limits: Limits | None = None,
    selected: tuple[str, ...] = (),
) -> TestReport:
    """The hidden tests on the base (patch None) or on a trusted patch such as the expected one."""
    with Sandbox(task.base_dir, backend, limits=(limits or Limits()).with_timeout(task.timeout_seconds)) as box:
        if patch:
            box.apply_patch(patch)
        copy_hidden_tests(box, task)
        return box.run_tests(selected, command=task.test_command)
