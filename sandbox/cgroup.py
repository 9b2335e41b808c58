"""A pids cgroup per command, when this process may create one (as root).

RLIMIT_NPROC does not hold back root, and sandboxes started by root map to root,
so a fork bomb there is contained by a cgroup's pids.max instead. A cgroup also
gives a reliable way to kill everything a command left running.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from pathlib import Path

logger = logging.getLogger(__name__)

CANDIDATE_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")
_warned: set[Path] = set()  # roots already reported unusable: once per process is enough


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
        except OSError as exc:
            # RLIMIT_NPROC and the session kill still apply; only root's fork bombs get through.
            if root not in _warned:
                _warned.add(root)
                logger.warning("no pids cgroup under %s (%s); commands run without one", root, exc)
            try:
                path.rmdir()
            except OSError:
                pass  # mkdir itself failed: there is nothing to remove
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
            except OSError as exc:
                logger.debug("%s: cgroup.kill failed (%s); killing pid by pid", self.path, exc)
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
                    pass  # exited between the listing and the kill
            time.sleep(0.005)
        logger.error("%s: processes still running after 1 s of SIGKILL: %s", self.path, self.pids())

    def remove(self) -> None:
        self.kill_all()
        last: OSError | None = None
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:  # EBUSY until the last killed process is gone
                last = exc
                time.sleep(0.01)
        logger.error("%s: could not remove the cgroup: %s", self.path, last)
