"""A command's cgroups come from a per-process pool: an emptied group is used again by the next
command with the same limits, counts only its own OOM kills, and is never shared with a forked
child or swept away by another process while its owner lives."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sandbox import cgroup
from sandbox.cgroup import CommandGroup
from sandbox.limits import Limits
from sandbox.process import run_process

LIMITS = Limits(wall_seconds=20, pids=91, memory_mb=333)


@pytest.fixture
def group() -> CommandGroup:
    made = CommandGroup.acquire(LIMITS)
    if made is None:
        pytest.fail("cgroups cannot be made here: the sandbox's memory and pid bounds would not hold")
    return made


def test_an_emptied_group_is_taken_again_by_the_next_command_with_the_same_limits(group: CommandGroup) -> None:
    paths = [path for path, _, _ in group.paths]
    group.release()
    again = CommandGroup.acquire(LIMITS)
    assert again is group and all(path.is_dir() for path in paths)
    other = CommandGroup.acquire(Limits(wall_seconds=20, pids=92, memory_mb=333))
    assert other is not None and other is not group  # other limits: another group
    other.remove()
    again.remove()


def test_a_group_with_a_process_left_in_it_is_not_pooled(group: CommandGroup, tmp_path: Path) -> None:
    group.release()
    result = run_process(["sh", "-c", "sleep 30 & echo started"], cwd=tmp_path, env={"PATH": os.environ["PATH"]},
                         limits=LIMITS, workspace=tmp_path)  # fmt: skip
    assert "started" in result.stdout
    # The background sleep was killed with its group before the call returned: nothing runs in it.
    assert group.pids() == []


def test_a_pooled_group_counts_only_the_oom_kills_of_its_own_command(group: CommandGroup) -> None:
    if group.memory is None:
        pytest.skip("no memory controller")
    group.oom_base -= 3  # as if the previous command's limit had killed three processes
    assert group.oom_kills() == 3
    group.release()
    assert CommandGroup.acquire(LIMITS) is group and group.oom_kills() == 0
    group.remove()


def test_a_forked_child_makes_its_own_groups(group: CommandGroup) -> None:
    group.release()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        taken = CommandGroup.acquire(LIMITS)
        os.write(write, b"shared" if taken is group else b"own")
        if taken is not None and taken is not group:
            taken.remove()
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    assert os.read(read, 16) == b"own"
    os.close(read)
    assert CommandGroup.acquire(LIMITS) is group
    group.remove()


def test_another_process_sweeping_stale_groups_leaves_a_live_owners_group_alone(group: CommandGroup) -> None:
    path = group.paths[0][0]
    old = time.time() - cgroup.STALE_AFTER_S - 60
    os.utime(path, (old, old))
    dead = path.parent / "999999999-0123456789abcdef"
    dead.mkdir()
    os.utime(dead, (old, old))
    cgroup._reap_stale(path.parent)
    assert path.is_dir() and not dead.exists()
    group.remove()
