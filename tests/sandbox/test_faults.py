"""Sandbox faults end in a clear state (issue 16): a missing backend, a full workspace.

Each says why where people look (the trajectory's or the validation run's error, the
command's result) and leaves nothing half-written: no row claiming a result, no sandbox
directory or mount behind.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox import Sandbox, SandboxError, quota
from sandbox.core import sandboxes_root
from sandbox.names import KillReason
from tasks.jobs import validate_suite_job
from tasks.models import Task, TaskSuite, ValidationRun
from tasks.services import import_task_dirs, start_validation_run
from tests.conftest import DEMO
from tests.sandbox.conftest import SMALL
from trajectories.batches import start_batch
from trajectories.models import RolloutBatch, Step, Trajectory
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory
from webapp.celery import app

NO_BWRAP = "bubblewrap (bwrap) is not installed"
# Writes 32 MB into the workspace in 1 MB files and says how far it got.
FILL = """
import os
written = 0
try:
    for i in range(32):
        with open(f"fill{i}", "wb") as fh:
            fh.write(b"x" * (1 << 20))
        written += 1
except OSError as exc:
    print("stopped at", written, exc.strerror)
else:
    print("wrote", written)
"""


@pytest.fixture
def without_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH on which bubblewrap is not found, with git still there."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to("/usr/bin/git")
    monkeypatch.setenv("PATH", str(bin_dir))


def one_task_batch(**fields: object) -> RolloutBatch:
    import_task_dirs(DEMO / "tasks" / "task_0001", "faults")
    batch = start_batch(TaskSuite.objects.get(name="faults"), RolloutSettings("scripted"), enqueue=False)
    RolloutBatch.objects.filter(pk=batch.pk).update(**fields)
    return batch


def leftovers() -> list[str]:
    """This process's sandbox directories and workspace mounts (others' tests share the root)."""
    root, mine = sandboxes_root(), f"{os.getpid()}-"
    found = [p.name for p in root.iterdir() if p.name.startswith(mine)]
    return found + [str(m) for m in quota.mounts_under(root) if m.relative_to(root).parts[0].startswith(mine)]


@pytest.mark.django_db
@pytest.mark.usefixtures("without_bwrap")
def test_a_missing_bwrap_fails_the_rollout_with_the_reason_and_records_no_steps() -> None:
    batch = one_task_batch()
    trajectory = run_trajectory(batch.trajectories.get().pk)
    assert trajectory is not None and trajectory.status == Trajectory.Status.FAILED
    assert trajectory.error.startswith(f"the sandbox could not start: {NO_BWRAP}")
    assert not Step.objects.filter(trajectory=trajectory).exists() and trajectory.patch == ""


@pytest.mark.django_db
def test_an_absent_podman_socket_fails_the_rollout_with_the_reason(tmp_path: Path) -> None:
    batch = one_task_batch(sandbox="docker")
    socket = tmp_path / "podman.sock"  # no service listens there
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCKER_HOST", f"unix://{socket}")
        trajectory = run_trajectory(batch.trajectories.get().pk)
    assert trajectory is not None and trajectory.status == Trajectory.Status.FAILED
    assert trajectory.error.startswith(f"the sandbox could not start: cannot reach a Docker API at unix://{socket}")
    assert not Step.objects.filter(trajectory=trajectory).exists()


@pytest.mark.django_db
@pytest.mark.usefixtures("without_bwrap")
def test_a_missing_bwrap_fails_the_validation_run_with_the_reason_and_leaves_the_task_unvalidated() -> None:
    import_task_dirs(DEMO / "tasks" / "task_0001", "faults")
    suite = TaskSuite.objects.get(name="faults")
    run = start_validation_run(suite, runs=1)
    app.conf.task_always_eager = True  # the per-task job the run sends out runs here, now
    try:
        validate_suite_job(run.pk)
    finally:
        app.conf.task_always_eager = False
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.FAILED and NO_BWRAP in run.error and run.results == {"task_0001": "error"}
    task = Task.objects.get(suite=suite)
    assert task.validation_status == Task.Validation.UNVALIDATED and task.validation_report == {}


def may_mount() -> bool:
    """Root with CAP_SYS_ADMIN (bit 21 of the effective set): what a tmpfs quota needs."""
    status = Path("/proc/self/status").read_text()
    caps = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), 16)
    return quota.can_mount() and bool(caps & (1 << 21))


def test_where_it_may_mount_the_workspace_is_an_exact_size_quota(repo: Path) -> None:
    with Sandbox(repo, "bwrap", limits=replace(SMALL, workspace_mb=8)) as box:
        assert box.workspace_quota == may_mount()
        if box.workspace_quota:
            size = box.exec(["df", "--output=size", "-k", "/workspace"]).stdout.split()[-1]
            assert int(size) == 8 * 1024


def test_a_command_that_fills_the_workspace_is_stopped_and_the_sandbox_stays_usable(repo: Path) -> None:
    with Sandbox(repo, "bwrap", limits=replace(SMALL, workspace_mb=8)) as box:
        box.write_file("fill.py", FILL)
        result = box.exec(["python", "fill.py"])
        # An exact quota (a tmpfs, as root) refuses the write; otherwise the size poll kills the writer.
        if box.workspace_quota:
            assert result.exit_code == 0 and "No space left on device" in result.stdout, result
            assert "wrote 32" not in result.stdout
        else:
            # It may finish between two polls; the result still names the limit it went past.
            assert result.killed_by == KillReason.WORKSPACE, result
        for name in os.listdir(box.workspace):
            if name.startswith("fill") and name != "fill.py":
                (box.workspace / name).unlink()
        after = box.exec(["python", "-c", "print('still here')"])
        assert after.exit_code == 0 and after.stdout == "still here\n"
        assert "fill.py" in box.diff()
        root = box.root
    assert not root.exists() and leftovers() == []


def test_a_repository_larger_than_the_workspace_fails_to_start_and_leaves_nothing_behind(repo: Path) -> None:
    (repo / "blob.bin").write_bytes(os.urandom(3 << 20))
    limits = replace(SMALL, workspace_mb=2)
    try:
        box = Sandbox(repo, "bwrap", limits=limits)
    except SandboxError as exc:
        # An exact quota (a tmpfs, as root with CAP_SYS_ADMIN) refuses the copy itself.
        assert "could not copy into the workspace" in str(exc) and "No space left on device" in str(exc)
    else:
        # Without one the copy fits on disk, and the first command is stopped instead.
        with box:
            assert not box.workspace_quota
            assert box.exec(["true"]).killed_by == KillReason.WORKSPACE
    assert leftovers() == []


def test_a_write_into_a_full_workspace_is_a_tool_error_that_leaves_the_old_file(tmp_path: Path) -> None:
    import resource
    import signal

    from sandbox.paths import ToolError
    from sandbox.tools import write_file

    target = tmp_path / "module.py"
    target.write_text("original = 1\n")
    target.chmod(0o755)
    # A file-size limit stands in for a full disk: the write fails part-way, as ENOSPC would.
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(ToolError, match="module.py: not written, the workspace is full"):
            write_file(tmp_path, "module.py", "x" * 100_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert target.read_text() == "original = 1\n"  # whole or nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["module.py"]  # no half-written neighbour
    write_file(tmp_path, "module.py", "changed = 2\n")
    assert target.read_text() == "changed = 2\n" and target.stat().st_mode & 0o777 == 0o755
