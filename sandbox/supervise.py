"""One supervision loop for every backend, with one set of constants.

A backend adapts what it started to `Supervised` (a host process group read through
pipes, a container read through the Engine API's attach stream); `supervise` enforces
the wall timeout, the output caps and the workspace size, decides when the command is
over, and kills it when a limit is hit. So the same command ends the same way, with
the same `truncated`, `timed_out` and `killed_by`, whatever runs it.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sandbox.limits import Limits
from sandbox.names import KillReason
from sandbox.output import BoundedBuffer
from sandbox.results import ExecResult

logger = logging.getLogger(__name__)

# The workspace is measured this often while a command runs; a fast writer can overshoot
# the limit by one interval's writes.
POLL_S = 0.05
# A huge workspace walks slowly: the next walk waits at least this many times as long as
# the last one took, so measuring never takes more than a tenth of a core.
SCAN_SPACING = 10
# Output still arriving after the command exited is read for this long; past it, a
# background child holds the output open, and it is killed with the rest.
EXIT_GRACE_S = 0.25
# Once the output has closed, the exit status is asked for after this long, then each
# time STATUS_BACKOFF times as long, up to POLL_S: an exit usually follows at once, but
# asking a container engine costs a round trip.
STATUS_FIRST_S = 0.005
STATUS_BACKOFF = 1.5
READ_CHUNK = 64 * 1024
STDOUT, STDERR = 1, 2


@dataclass
class Output:
    """What one `Supervised.read` saw."""

    chunks: list[tuple[int, bytes]] = field(default_factory=list)  # (STDOUT | STDERR, bytes)
    closed: bool = False  # all output is closed: nothing more will arrive
    exited: bool = False  # the command has exited, though its output may still be open


@dataclass(frozen=True)
class Exit:
    code: int | None
    out_of_memory: bool = False  # the engine reports that its memory limit killed the command


class Supervised(Protocol):
    """A started command, as the supervisor drives it."""

    @property
    def ident(self) -> str:
        """Names the command in logs: a container's name, a process id."""

    @property
    def startup_ms(self) -> float:
        """From the backend's call to the command running; read once supervision ends."""

    def read(self, timeout: float) -> Output:
        """Wait up to `timeout` seconds for output, feeding the command's stdin meanwhile."""

    def wait(self, timeout: float) -> Exit | None:
        """The exit, waiting for it up to `timeout` seconds; None while it runs."""

    def kill(self) -> None:
        """SIGKILL the command and everything it started; returns once they are dead.

        No SIGTERM first: the command is untrusted and a limit is a verdict, not a request.
        """


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
                        continue  # removed by the command while we walked: it no longer counts
        except OSError:
            continue
    return total


def supervise(target: Supervised, limits: Limits, workspace: Path, started: float) -> ExecResult:
    """Run `target` to its end under `limits`; `started` (time.monotonic()) is when the backend's call began.

    The wall clock counts from here, once the command runs, so a slow container start
    does not eat into the command's time.
    """
    begun = time.monotonic()
    sinks = {STDOUT: BoundedBuffer(limits.output_bytes), STDERR: BoundedBuffer(limits.output_bytes)}
    out, err = sinks[STDOUT], sinks[STDERR]
    deadline = begun + limits.wall_seconds
    workspace_limit = limits.workspace_mb << 20
    next_scan = begun + POLL_S
    killed_by: KillReason | None = None
    ended: Exit | None = None
    streaming = True
    exited_at: float | None = None
    status_delay = STATUS_FIRST_S
    while True:
        now = time.monotonic()
        if now >= deadline:
            killed_by = KillReason.WALL
            break
        if now >= next_scan:
            if workspace_bytes(workspace) > workspace_limit:
                killed_by = KillReason.WORKSPACE
                break
            next_scan = time.monotonic() + max(POLL_S, SCAN_SPACING * (time.monotonic() - now))
        wake = min(deadline, next_scan)
        if streaming:
            seen = target.read(max(0.0, wake - now))
            for stream, chunk in seen.chunks:
                sinks[stream].append(chunk)
            if out.total + err.total > limits.output_hard_bytes:
                killed_by = KillReason.OUTPUT
                break
            if seen.closed:
                # Usually the command exited; it may also have closed its output and kept running.
                streaming = False
            elif seen.exited:
                if exited_at is None:
                    exited_at = now
                streaming = now - exited_at <= EXIT_GRACE_S
            continue
        ended = target.wait(max(0.0, min(status_delay, wake - time.monotonic())))
        if ended is not None:
            break
        status_delay = min(status_delay * STATUS_BACKOFF, POLL_S)

    elapsed_ms = (time.monotonic() - begun) * 1000
    if killed_by is not None:
        target.kill()
        limit = {
            KillReason.WALL: f"{limits.wall_seconds:g} s",
            KillReason.OUTPUT: f"{limits.output_hard_bytes} bytes",
            KillReason.WORKSPACE: f"{limits.workspace_mb} MB",
        }[killed_by]
        logger.info(
            "sandbox %s: killed by the %s limit (%s) after %.0f ms, %d bytes of output, workspace %s",
            target.ident,
            killed_by,
            limit,
            elapsed_ms,
            out.total + err.total,
            workspace,
        )
    elif workspace_bytes(workspace) > workspace_limit:
        # It grew past the limit between two measurements and exited on its own.
        killed_by = KillReason.WORKSPACE
        logger.info(
            "sandbox %s: exited with the workspace past its limit (%d MB) after %.0f ms, workspace %s",
            target.ident,
            limits.workspace_mb,
            elapsed_ms,
            workspace,
        )
    if ended is not None:
        _log_exit(target.ident, ended, elapsed_ms)
    return ExecResult(
        exit_code=None if ended is None else ended.code,  # None: killed before it exited on its own
        stdout=out.text(),
        stderr=err.text(),
        truncated=out.truncated or err.truncated or killed_by == KillReason.OUTPUT,
        timed_out=killed_by == KillReason.WALL,
        duration_ms=round((time.monotonic() - started) * 1000, 3),
        startup_ms=round(target.startup_ms, 3),
        killed_by=killed_by,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
    )


def _log_exit(ident: str, ended: Exit, elapsed_ms: float) -> None:
    if ended.out_of_memory:
        logger.info("sandbox %s: killed by the memory limit after %.0f ms", ident, elapsed_ms)
        return
    code = ended.code if ended.code is not None else 0
    # Popen reports a death by signal as -signal; a shell, bwrap and a container's init as 128 + signal.
    signum = -code if code < 0 else code - 128 if 128 < code < 160 else 0
    if signum in (signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSEGV):
        logger.info(
            "sandbox %s: the command died of %s after %.0f ms (a memory, CPU time or file size limit?)",
            ident,
            signal.Signals(signum).name,
            elapsed_ms,
        )
    else:
        logger.debug("sandbox %s: exited with %s after %.0f ms", ident, ended.code, elapsed_ms)
