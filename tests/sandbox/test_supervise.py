"""The one supervision loop every backend runs under: the same command ends the same way,
with the same fields, whether bwrap, a container or a host process runs it."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sandbox import Limits, SandboxError, make_backend
from sandbox.backends.base import Backend
from sandbox.core import BACKENDS
from sandbox.names import BackendName, KillReason
from sandbox.results import ExecResult
from sandbox.supervise import EXIT_GRACE_S
from tests.sandbox.conftest import backend_for
from tests.sandbox.test_lifecycle import processes_with

LIMITS = Limits(
    wall_seconds=20,
    cpu_seconds=20,
    memory_mb=512,
    pids=64,
    file_size_mb=16,
    open_files=256,
    output_bytes=100,
    output_hard_bytes=1024 * 1024,
    workspace_mb=16,
)


@pytest.fixture(params=list(BackendName))
def backend(request: pytest.FixtureRequest) -> Backend:
    return backend_for(request.param, request)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    # Not a capped tmpfs: the workspace limit here is the supervisor's own measuring.
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def fields(result: ExecResult) -> dict[str, Any]:
    return {
        "exit_code": result.exit_code,
        "truncated": result.truncated,
        "timed_out": result.timed_out,
        "killed_by": result.killed_by,
    }


SAME_COMMANDS: dict[str, tuple[list[str], Limits]] = {
    "exit": (["sh", "-c", "echo out; echo err >&2; exit 3"], LIMITS),
    "truncated": (["seq", "1", "100000"], LIMITS),
    "output_cap": (["yes", "crucible"], LIMITS),
    "wall": (["sh", "-c", "echo begun; sleep 876711"], replace(LIMITS, wall_seconds=1)),
    "workspace": (["sh", "-c", "i=0; while :; do head -c 4000000 /dev/zero > f$i; i=$((i+1)); done"], LIMITS),
    "closed_output": (["sh", "-c", "exec >&- 2>&-; sleep 0.3; exit 4"], LIMITS),
}


def run_everywhere(request: pytest.FixtureRequest, tmp_path: Path, argv: list[str], limits: Limits) -> list[ExecResult]:
    results = []
    for name in BackendName:
        workspace = tmp_path / f"ws-{name}"
        workspace.mkdir()
        results.append(backend_for(name, request).run(argv, workspace, limits))
    return results


@pytest.mark.parametrize("case", list(SAME_COMMANDS))
def test_every_backend_reports_the_same_fields_for_the_same_command(
    case: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    argv, limits = SAME_COMMANDS[case]
    results = run_everywhere(request, tmp_path, argv, limits)
    assert [fields(r) for r in results] == [fields(results[0])] * len(results)
    if case in ("exit", "truncated", "wall"):
        # Deterministic output: the very same text and byte counts, head and tail included.
        assert {(r.stdout, r.stderr, r.stdout_bytes, r.stderr_bytes) for r in results} == {
            (results[0].stdout, results[0].stderr, results[0].stdout_bytes, results[0].stderr_bytes)
        }
    expected = {
        "exit": {"exit_code": 3, "truncated": False, "timed_out": False, "killed_by": None},
        "truncated": {"exit_code": 0, "truncated": True, "timed_out": False, "killed_by": None},
        "output_cap": {"exit_code": None, "truncated": True, "timed_out": False, "killed_by": KillReason.OUTPUT},
        "wall": {"exit_code": None, "truncated": False, "timed_out": True, "killed_by": KillReason.WALL},
        "workspace": {"exit_code": None, "truncated": False, "timed_out": False, "killed_by": KillReason.WORKSPACE},
        "closed_output": {"exit_code": 4, "truncated": False, "timed_out": False, "killed_by": None},
    }[case]
    assert fields(results[0]) == expected
    assert processes_with("sleep 876711") == []


def test_the_wall_timeout_kills_the_whole_process_group(backend: Backend, workspace: Path) -> None:
    started = time.monotonic()
    result = backend.run(["sh", "-c", "sleep 876712 & sleep 876713 & wait"], workspace, replace(LIMITS, wall_seconds=1))
    assert result.killed_by == KillReason.WALL and result.timed_out and result.exit_code is None
    assert 1000 <= result.duration_ms and time.monotonic() - started < 10
    assert processes_with("sleep 876712") == [] and processes_with("sleep 876713") == []


def test_the_output_cap_kills_the_command_and_keeps_head_and_tail(backend: Backend, workspace: Path) -> None:
    script = "echo first; while :; do echo middle; done & sleep 876714"
    result = backend.run(["sh", "-c", script], workspace, LIMITS)
    assert result.killed_by == KillReason.OUTPUT and result.truncated and result.exit_code is None
    assert result.stdout_bytes > LIMITS.output_hard_bytes
    assert result.stdout.startswith("first\n") and "bytes of output omitted" in result.stdout
    assert len(result.stdout.encode()) <= LIMITS.output_bytes + 100
    assert processes_with("sleep 876714") == []


def test_a_background_child_holding_the_output_open_does_not_hold_up_the_result(
    backend: Backend, workspace: Path
) -> None:
    started = time.monotonic()
    result = backend.run(["sh", "-c", "sleep 876715 & echo started"], workspace, LIMITS)
    assert result.stdout == "started\n" and result.exit_code == 0 and result.killed_by is None
    assert time.monotonic() - started < 5 * EXIT_GRACE_S + 2
    assert processes_with("sleep 876715") == []


def test_stdin_is_fed_while_output_is_read_so_neither_side_blocks(backend: Backend, workspace: Path) -> None:
    data = os.urandom(1024 * 1024)
    # The command writes far more than a pipe holds before it reads any of its input.
    script = (
        "import hashlib, sys; sys.stdout.write('x' * 2_000_000); sys.stdout.flush(); "
        "print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
    )
    result = backend.run(
        ["python", "-c", script], workspace, replace(LIMITS, output_hard_bytes=16 << 20, output_bytes=1024), stdin=data
    )
    assert result.exit_code == 0 and result.killed_by is None, result
    assert result.stdout.strip().endswith(hashlib.sha256(data).hexdigest())
    assert backend.run(["cat"], workspace, LIMITS, stdin=b"").stdout == ""


def test_a_kill_is_logged_with_the_command_and_how_long_it_ran(
    backend: Backend, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sandbox.supervise")
    backend.run(["sleep", "876716"], workspace, replace(LIMITS, wall_seconds=0.5))
    kills = [r.getMessage() for r in caplog.records if "killed by the wall limit" in r.getMessage()]
    assert len(kills) == 1 and str(workspace) in kills[0] and " ms" in kills[0]


def test_every_backend_name_has_a_factory_and_unknown_names_are_refused() -> None:
    assert set(BACKENDS) == set(BackendName)
    assert make_backend(BackendName.BWRAP).name == BackendName.BWRAP
    assert make_backend("local", allow_unsafe=True).name == BackendName.LOCAL
    with pytest.raises(SandboxError, match="unknown sandbox backend 'chroot' \\(bwrap, docker, local\\)"):
        make_backend("chroot")
