"""An exact size limit for a workspace: a private tmpfs mounted over it, when we may mount.

Polling the workspace size stops a runaway writer only after the fact, by however
much it wrote in one interval (hundreds of MB on a fast disk). A size-capped tmpfs
makes the write itself fail with ENOSPC. It needs CAP_SYS_ADMIN (root); without it
the backends fall back to polling.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

MNT_DETACH = 2
MS_NOSUID = 2
MS_NODEV = 4
_libc = ctypes.CDLL(None, use_errno=True)


def can_mount() -> bool:
    return os.geteuid() == 0 and os.environ.get("CRUCIBLE_SANDBOX_TMPFS", "1") != "0"


def mount_tmpfs(path: Path, size_mb: int) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    # nosuid and nodev are mount flags: tmpfs refuses them as data options (EINVAL), and
    # with them there the quota was never mounted at all.
    options = f"size={size_mb}m,mode=0755".encode()
    return _libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) == 0


def unmount(path: Path) -> None:
    _libc.umount2(str(path).encode(), MNT_DETACH)


def mounts_under(root: Path) -> list[Path]:
    prefix = str(root.resolve()) + "/"
    found = []
    with open("/proc/self/mounts") as fh:
        for line in fh:
            target = line.split()[1].replace("\\040", " ")
            if target.startswith(prefix):
                found.append(Path(target))
    return sorted(found, reverse=True)
