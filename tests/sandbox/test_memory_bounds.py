"""A sandbox's memory is bounded as a whole (issue 16): processes and tmpfs together, not per process.

RLIMIT_AS caps one process; what a command parks in a tmpfs (/dev/shm, /tmp, bwrap's own
root) is memory no rlimit sees, and a fork of processes each under the limit adds up.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox import Limits, Sandbox
from sandbox.cgroup import CommandGroup
from sandbox.names import ISOLATING_BACKENDS, BackendName
from tests.sandbox.conftest import SMALL, backend_for
from tests.sandbox.test_lifecycle import processes_with

LIMIT = replace(SMALL, memory_mb=512, file_size_mb=16, wall_seconds=20)
CHUNK_MB = 8
# Writes 720 MB in 8 MB files (each under RLIMIT_FSIZE) and says how far it got.
FILL = """
import os, sys
where, written = sys.argv[1], 0
try:
    for i in range(90):
        with open(os.path.join(where, f"fill{i}"), "wb") as fh:
            fh.write(b"x" * (8 << 20))
        written += 8
except OSError as exc:
    print("stopped at", written, exc.strerror)
else:
    print("wrote", written)
"""
# Eight processes of 100 MB each, every one well under a 512 MB RLIMIT_AS; 800 MB together.
HOGS = """
import os, sys, time
kids = []
for i in range(8):
    pid = os.fork()
    if pid == 0:
        block = bytearray(100 << 20)
        for j in range(0, len(block), 4096):
            block[j] = 1
        print("allocated", i, flush=True)
        time.sleep(float(sys.argv[1]))
        print("survived", i, flush=True)
        os._exit(0)
    kids.append(pid)
for kid in kids:
    os.waitpid(kid, 0)
print("all done", flush=True)
"""


@pytest.mark.parametrize("backend", ISOLATING_BACKENDS)
@pytest.mark.parametrize("where", ["/dev/shm", "/tmp", "/dev", "/"])
def test_720_mb_written_to_a_tmpfs_under_a_512_mb_limit_is_refused(
    backend: BackendName, where: str, repo: Path, request: pytest.FixtureRequest
) -> None:
    with Sandbox(repo, backend_for(backend, request), limits=LIMIT) as box:
        box.write_file("fill.py", FILL)
        result = box.exec(["python", "fill.py", where], timeout=20)
    assert "wrote 720" not in result.stdout, result
    if result.exit_code == 0:
        written = int(result.stdout.split()[2])
        # What it could write stays within the part of the limit the tmpfs were given.
        assert written <= LIMIT.memory_mb // 2, result.stdout
    else:
        assert result.exit_code is not None or result.killed_by, result


@given(memory=st.integers(1, 1 << 16), workspace=st.integers(1, 1 << 16), shm=st.integers(1, 1 << 12))
def test_the_tmpfs_sizes_together_stay_within_half_the_memory_limit(memory: int, workspace: int, shm: int) -> None:
    tmp_mb, shm_mb = Limits(memory_mb=memory, workspace_mb=workspace, shm_mb=shm).tmpfs_mb()
    assert tmp_mb >= 1 and shm_mb >= 1
    assert tmp_mb <= workspace and shm_mb <= shm
    assert tmp_mb + shm_mb <= max(2, memory // 2)


@pytest.mark.parametrize("backend", ISOLATING_BACKENDS)
def test_a_fork_of_memory_hogs_is_bounded_as_a_whole(
    backend: BackendName, repo: Path, request: pytest.FixtureRequest
) -> None:
    with Sandbox(repo, backend_for(backend, request), limits=LIMIT) as box:
        box.write_file("hogs.py", HOGS)
        result = box.exec(["python", "hogs.py", "2"], timeout=20)
    # The survivors hold their 100 MB together at the end; within 512 MB, the interpreters'
    # own memory included, that is never more than five of the eight.
    assert result.stdout.count("survived") <= 5, result.stdout


def test_a_fork_of_memory_hogs_is_killed_as_a_group_when_a_memory_cgroup_is_available(repo: Path) -> None:
    group = CommandGroup.acquire(LIMIT)
    available = group is not None and group.memory is not None
    if group is not None:
        group.remove()
    with Sandbox(repo, "bwrap", limits=LIMIT) as box:
        box.write_file("hogs.py", HOGS)
        started = time.monotonic()
        result = box.exec(["python", "hogs.py", "30"], timeout=20)
        took = time.monotonic() - started
        if available:
            # One hog over the limit ends them all at once: no survivor sleeps its 30 s out.
            assert took < 10 and result.exit_code not in (0, None) and not result.timed_out, result
            assert "survived" not in result.stdout and "all done" not in result.stdout
            assert not processes_with("python hogs.py 30")
        else:
            # No cgroup here (not root, or no writable memory hierarchy): each hog is still under
            # RLIMIT_AS, so the command runs to its wall clock, where the whole group is killed.
            assert result.timed_out and result.stdout.count("allocated") == 8, result
