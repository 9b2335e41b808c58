"""Private per-run directories: made fresh (0700), never reused, never through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sandbox.backends.base import SandboxError


def private_dir(parent: Path, name: str) -> Path:
    """Create `parent/name` as a new directory only we can enter, or refuse.

    Callers pick names with enough randomness that nobody can guess them, so an entry
    already there was planted (a link to somewhere else, a folder another user can read or
    write): it is refused, never reused. mkdir does not follow a final symlink; the check
    afterwards, by descriptor, catches a directory swapped in between.
    """
    path = parent / name
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        raise SandboxError(f"{path} already exists; refusing to reuse a per-run directory") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise SandboxError(f"{path} was replaced while being created; refusing it") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise SandboxError(f"{path} was replaced while being created; refusing it")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)  # a umask can only have taken bits away
    finally:
        os.close(fd)
    return path
