"""A pids cgroup per command, when this process may create one (as root).

RLIMIT_NPROC does not hold back root, and sandboxes started by root map to root,
so a fork bomb there is contained by a cgroup's pids.max instead. A cgroup also
gives a reliable way to kill everything a command left running.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

CANDIDATE_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")


def _usable_root() -> Path | None:
    for root in map(Path, CANDIDATE_ROOTS):
        procs = root / "cgroup.procs"
        if not procs.exists() or not os.access(root, os.W_OK):
            continue
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "pids" not in controllers.read_text().split():
            continue  # a v2 hierarchy without the pids controller
        return root
    return None


class PidsGroup:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.procs = str(path / "cgroup.procs")

    @classmethod
    def create(cls, max_pids: int) -> PidsGroup | None:
        root = _usable_root()
        if root is None:
            return None
        path = root / "crucible" / uuid.uuid4().hex
        try:
            path.mkdir(parents=True)
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            try:
                path.rmdir()
            except OSError:
                pass
            return None
        return cls(path)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in Path(self.procs).read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        kill_file = self.path / "cgroup.kill"
        if kill_file.exists():
            try:
                kill_file.write_text("1")
            except OSError:
                pass
        # cgroup v1 has no cgroup.kill: kill what is listed until nothing is, since a
        # fork bomb can add processes between the read and the kill.
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)
