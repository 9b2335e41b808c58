"""Reading the workspace without being tricked by it (links out, FIFOs, huge files), and which
paths lie outside it.
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from rewards.anticheat.patterns import WORKSPACE


def outside_workspace(path: str) -> bool:
    if path.startswith(WORKSPACE):
        return not posixpath.normpath(path).startswith(WORKSPACE)
    if path in ("/dev/null", "") or "://" in path:
        return False
    return path.startswith(("/", "~")) or posixpath.normpath(path).startswith("..")


def read_bounded(root: Path, rel: str, limit: int) -> bytes | None:
    """A regular file's bytes inside root, never following a link out nor blocking on a FIFO."""
    path = root / rel
    real, top = os.path.realpath(path), os.path.realpath(root)
    if not real.startswith(top + os.sep):
        return None
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)[:limit]
    finally:
        os.close(fd)


def file_size(path: Path) -> int | None:
    try:
        info = path.lstat()
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None
