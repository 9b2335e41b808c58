"""Running one command as a host process under limits: shared by the bwrap and local backends."""

from __future__ import annotations

import ctypes
import os
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from sandbox.cgroup import PidsGroup
from sandbox.limits import Limits
from sandbox.output import BoundedBuffer
from sandbox.results import ExecResult

PR_SET_PDEATHSIG = 1
# The workspace is measured this often while a command runs (more rarely when a
# measurement itself is slow); a fast writer can overshoot by one interval's writes.
WORKSPACE_POLL_S = 0.05
EXIT_GRACE_S = 0.25  # output still arriving after the command exited
_libc = ctypes.CDLL(None, use_errno=True)


def workspace_bytes(root: Path) -> int:
    """Sum of regular file sizes under root; tolerant of files vanishing while it walks."""
    total = 0
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def _preexec(limits: Limits, cgroup_procs: str | None, parent: int) -> None:
    """Runs in the child between fork and exec: everything here must be async-signal-safe-ish."""
    if cgroup_procs is not None:
        with open(cgroup_procs, "w") as fh:
            fh.write("0")
    mb = 1024 * 1024
    for what, value in (
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_AS, limits.memory_mb * mb),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * mb),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_NPROC, limits.pids),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(what, (value, value))
    # If the process that started us dies (even by SIGKILL), so do we. It may already
    # have died between fork and here, which the death signal would never report.
    _libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(137)


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    workspace: Path,
    stdin: bytes | None = None,
    status_fd: bool = False,
) -> ExecResult:
    """Run argv, bounded in time, output and workspace size; kill its whole tree at the end.

    With status_fd, argv must contain the placeholder "{status_fd}" once; it is
    replaced by a pipe on which the sandbox tool reports that the command started,
    which is what startup_ms measures.
    """
    started = time.perf_counter()
    parent = os.getpid()
    cgroup = PidsGroup.create(limits.pids) if os.geteuid() == 0 else None
    status_r = status_w = -1
    argv = list(argv)
    if status_fd:
        status_r, status_w = os.pipe()
        argv = [a.replace("{status_fd}", str(status_w)) for a in argv]
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            pass_fds=(status_w,) if status_fd else (),
            preexec_fn=lambda: _preexec(limits, cgroup.procs if cgroup else None, parent),
        )
    except BaseException:
        if cgroup:
            cgroup.remove()
        if status_fd:
            os.close(status_r)
            os.close(status_w)
        raise
    if status_fd:
        os.close(status_w)
    try:
        return _supervise(proc, limits, workspace, started, stdin, status_r if status_fd else None)
    finally:
        _kill_tree(proc, cgroup)
        if status_fd:
            os.close(status_r)


def _supervise(
    proc: subprocess.Popen[bytes], limits: Limits, workspace: Path, started: float,
    stdin: bytes | None, status_r: int | None,
) -> ExecResult:
    if stdin is not None and proc.stdin is not None:
        try:
            proc.stdin.write(stdin)
        except BrokenPipeError:
            pass
        proc.stdin.close()
    assert proc.stdout is not None and proc.stderr is not None
    buffers = {proc.stdout.fileno(): BoundedBuffer(limits.output_bytes),
               proc.stderr.fileno(): BoundedBuffer(limits.output_bytes)}
    selector = selectors.DefaultSelector()
    for stream in (proc.stdout, proc.stderr):
        os.set_blocking(stream.fileno(), False)
        selector.register(stream.fileno(), selectors.EVENT_READ)
    if status_r is not None:
        selector.register(status_r, selectors.EVENT_READ)
    startup_ms = 0.0 if status_r is not None else (time.perf_counter() - started) * 1000
    deadline = started + limits.wall_seconds
    next_poll = time.perf_counter() + WORKSPACE_POLL_S
    workspace_limit = limits.workspace_mb * 1024 * 1024
    killed_by: str | None = None
    open_streams = 2
    exited_at: float | None = None
    while open_streams and killed_by is None:
        now = time.perf_counter()
        if now >= deadline:
            killed_by = "wall"
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        elif exited_at is not None and now - exited_at > EXIT_GRACE_S:
            break  # a background child holds the pipes open; it is killed below
        for key, _ in selector.select(timeout=min(deadline - now, WORKSPACE_POLL_S)):
            fd = int(key.fd)
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if fd == status_r:
                if not startup_ms:
                    startup_ms = (time.perf_counter() - started) * 1000
                if not chunk:
                    selector.unregister(fd)
                continue
            if not chunk:
                selector.unregister(fd)
                open_streams -= 1
                continue
            buffers[fd].append(chunk)
        if sum(b.total for b in buffers.values()) > limits.output_hard_bytes:
            killed_by = "output"
        elif time.perf_counter() >= next_poll:
            measured_at = time.perf_counter()
            if workspace_bytes(workspace) > workspace_limit:
                killed_by = "workspace"
            scan = time.perf_counter() - measured_at
            next_poll = time.perf_counter() + max(WORKSPACE_POLL_S, 10 * scan)
    if killed_by is None:
        # Output closed; the process may still be running (it closed its pipes).
        try:
            proc.wait(timeout=max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            killed_by = "wall"
    selector.close()
    if killed_by is not None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    out, err = buffers[proc.stdout.fileno()], buffers[proc.stderr.fileno()]
    proc.stdout.close()
    proc.stderr.close()
    if killed_by is None and workspace_bytes(workspace) > workspace_limit:
        killed_by = "workspace"  # grew past the limit between two polls
    return ExecResult(
        exit_code=None if killed_by in ("wall", "output") else proc.returncode,
        stdout=out.text(), stderr=err.text(),
        truncated=out.truncated or err.truncated or killed_by == "output",
        timed_out=killed_by == "wall", duration_ms=round((time.perf_counter() - started) * 1000, 3),
        startup_ms=round(startup_ms, 3), killed_by=killed_by,
        stdout_bytes=out.total, stderr_bytes=err.total,
    )


def _kill_tree(proc: subprocess.Popen[bytes], cgroup: PidsGroup | None) -> None:
    """Nothing the command started outlives the call: its session, then its cgroup."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        proc.wait()
    if cgroup is not None:
        cgroup.remove()
