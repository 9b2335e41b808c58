"""Walking a tree of files someone else made, by file descriptor (plain Python, no Django).

Every directory and file is opened relative to its already-opened parent with O_NOFOLLOW,
never by a path the kernel would resolve again. A symbolic link, a FIFO, a device or a
socket anywhere is refused with its path, never skipped, and a link swapped in while we
walk is refused just the same. Used by the task store (tasks.storage) and by the copy of
hidden tests into a workspace (tasks.spec).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Never part of a task's content: VCS metadata and caches the tests leave behind. Such
# entries are neither read nor stored, so what they hold (links included) is never looked at.
IGNORED_NAMES = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# Deeper trees are refused: every level holds a directory descriptor open while we walk.
MAX_TREE_DEPTH = 64

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the check must not hang the import on open().
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class TreeError(ValueError):
    pass


def kind_of(mode: int) -> str:
    """What a non-regular entry is, in words for an error message."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "a special file"


def refusal(rel: str, mode: int) -> TreeError:
    if stat.S_ISLNK(mode):
        return TreeError(f"{rel}: symbolic links are not allowed in a task tree")
    return TreeError(f"{rel}: is {kind_of(mode)}; only regular files and folders are allowed in a task tree")


def open_dir(path: Path | str, dir_fd: int | None = None, rel: str | None = None) -> int:
    """A descriptor of the real directory `path` (relative to `dir_fd`); a link there is refused."""
    shown = rel if rel is not None else str(path)
    try:
        info = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise TreeError(f"{shown}: no such directory") from None
    if not stat.S_ISDIR(info.st_mode):
        raise refusal(shown, info.st_mode)
    try:
        return os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        # ELOOP / ENOTDIR: replaced by a link or a file between the check and the open.
        raise TreeError(f"{shown}: cannot open as a plain directory ({exc.strerror})") from None


def exists_at(dir_fd: int, name: str) -> bool:
    """Whether `name` is in the directory open as `dir_fd`, a link counted as itself (never followed)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def open_regular(name: str, dir_fd: int | None, rel: str) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file `name` in `dir_fd`, and its status; anything else is refused."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise TreeError(f"{rel}: no such file") from None
    except OSError as exc:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISREG(info.st_mode):
            raise TreeError(f"{rel}: cannot be read ({exc.strerror})") from None
        raise refusal(rel, info.st_mode) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise refusal(rel, info.st_mode)
    os.set_blocking(fd, True)
    return fd, info


def _ignored(name: str) -> bool:
    return name in IGNORED_NAMES or name.endswith(".pyc")


def check_tree(root: Path, dir_fd: int | None = None, prefix: str = "") -> None:
    """Refuse a link or special file anywhere under root (without opening files)."""
    for _ in walk(root, dir_fd, prefix, open_files=False):
        pass


@dataclass(frozen=True)
class TreeEntry:
    rel: str
    fd: int  # open only until the walk moves on; -1 when files are not opened
    info: os.stat_result


def walk(root: Path, dir_fd: int | None = None, prefix: str = "", open_files: bool = True) -> Iterator[TreeEntry]:
    """Every regular file under root, depth first in name order, each checked by descriptor.

    `prefix` is put before every relative path in error messages and entries (the folder
    root sits in, for a message that names the whole path).
    """
    stack: list[tuple[int, str, Iterator[str]]] = []
    rel = prefix.rstrip("/") or str(root)
    try:
        top = open_dir(root, dir_fd, rel)
        stack.append((top, prefix, iter(sorted(os.listdir(top)))))
        while stack:
            fd, base, names = stack[-1]
            name = next(names, None)
            if name is None:
                os.close(stack.pop()[0])
                continue
            if _ignored(name):
                continue
            rel = base + name
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if len(stack) >= MAX_TREE_DEPTH:
                    raise TreeError(f"{rel}: folders nest deeper than {MAX_TREE_DEPTH} levels")
                child = open_dir(name, fd, rel)
                stack.append((child, rel + "/", iter(sorted(os.listdir(child)))))
            elif not stat.S_ISREG(info.st_mode):
                raise refusal(rel, info.st_mode)
            elif not open_files:
                yield TreeEntry(rel, -1, info)
            else:
                file_fd, info = open_regular(name, fd, rel)
                try:
                    yield TreeEntry(rel, file_fd, info)
                finally:
                    os.close(file_fd)
    except OSError as exc:
        # Removed or made unreadable while we walked: a clear error, not a traceback.
        raise TreeError(f"{rel}: cannot be read ({exc.strerror})") from None
    finally:
        for fd, _, _ in stack:
            os.close(fd)
