"""Content-addressed tree store under var/store/trees/<sha256>/.

Repository snapshots and hidden tests are kept as plain directories named by a hash
of their content, so the same snapshot imported twice is stored once, a task's
version can be derived from hashes, and sandboxes can copy a tree without unpacking.

Trees come from people we do not trust (task archives, task folders on a shared machine):
they are read only through `tasks.trees.walk`, which refuses links and special files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from django.conf import settings

from tasks.trees import TreeError, walk

__all__ = ["TreeError", "hash_tree", "iter_tree", "put_tree", "read_tree_file", "store_root", "tree_path"]


def store_root() -> Path:
    return Path(settings.VAR_DIR) / "store" / "trees"


def iter_tree(root: Path) -> list[tuple[str, Path]]:
    """Regular files under root as sorted (posix relpath, path); refuses links and special files."""
    return sorted((e.rel, root / e.rel) for e in walk(root, None, "", open_files=False))


def _digest(lines: list[tuple[str, bool, str, int]]) -> tuple[str, list[list[object]]]:
    outer = hashlib.sha256()
    manifest: list[list[object]] = []
    for rel, executable, inner, size in sorted(lines):
        outer.update(f"{rel}\0{int(executable)}\0{inner}\n".encode())
        manifest.append([rel, size])
    return "sha256:" + outer.hexdigest(), manifest


def _read_tree(root: Path, dir_fd: int | None, copy_to: Path | None) -> tuple[str, list[list[object]]]:
    lines: list[tuple[str, bool, str, int]] = []
    for entry in walk(root, dir_fd, "", open_files=True):
        inner = hashlib.sha256()
        size = 0
        executable = bool(entry.info.st_mode & stat.S_IXUSR)
        with contextlib.ExitStack() as stack:
            source = stack.enter_context(os.fdopen(entry.fd, "rb", closefd=False))
            sink = None
            if copy_to is not None:
                target = copy_to / entry.rel
                target.parent.mkdir(parents=True, exist_ok=True)  # inside our own fresh mkdtemp
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                sink = stack.enter_context(os.fdopen(os.open(target, flags, 0o755 if executable else 0o644), "wb"))
            while chunk := source.read(1 << 20):
                inner.update(chunk)
                size += len(chunk)
                if sink is not None:
                    sink.write(chunk)
        lines.append((entry.rel, executable, inner.hexdigest(), size))
    return _digest(lines)


def hash_tree(root: Path, dir_fd: int | None = None) -> tuple[str, list[list[object]]]:
    """sha256 over (path, executable bit, content hash) of every file, and the manifest."""
    return _read_tree(root, dir_fd, None)


def tree_path(digest: str) -> Path:
    return store_root() / digest.removeprefix("sha256:")


def put_tree(root: Path) -> tuple[str, list[list[object]]]:
    """Copy root into the store (once per content) and return its hash and manifest.

    The hash is taken from the very bytes copied, in one pass, so a stored tree always
    holds what its name says even if the source changed while we read it; a caller that
    hashed the source earlier compares the two to notice such a change.
    """
    parent = store_root()
    parent.mkdir(parents=True, exist_ok=True)
    # Build beside the destination and rename, so a crash never leaves a half tree
    # under a name that claims complete content.
    tmp = Path(tempfile.mkdtemp(prefix=".incoming-", dir=parent))
    try:
        digest, manifest = _read_tree(root, None, tmp)
        dest = tree_path(digest)
        if not dest.exists():
            try:
                os.rename(tmp, dest)
            except OSError:
                if not dest.exists():  # not a concurrent import of the same content
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return digest, manifest


def read_tree_file(digest: str, rel: str, limit: int = 1 << 20) -> bytes:
    root = tree_path(digest).resolve()
    path = (root / rel).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise TreeError(f"{rel}: no such file in tree")
    with path.open("rb") as fh:
        return fh.read(limit)
