"""Content-addressed tree store under var/store/trees/<sha256>/.

Repository snapshots and hidden tests are kept as plain directories named by a hash
of their content, so the same snapshot imported twice is stored once, a task's
version can be derived from hashes, and sandboxes can copy a tree without unpacking.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from django.conf import settings

# Never part of a task's content: VCS metadata and caches the tests leave behind.
IGNORED_NAMES = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})


class TreeError(ValueError):
    pass


def store_root() -> Path:
    return Path(settings.VAR_DIR) / "store" / "trees"


def iter_tree(root: Path) -> list[tuple[str, Path]]:
    """Regular files under root as sorted (posix relpath, path); refuses links out."""
    files: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        for name in filenames:
            if name in IGNORED_NAMES or name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            mode = path.lstat().st_mode
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(mode):
                # A symlink in an imported snapshot could point at host files.
                raise TreeError(f"{rel}: symbolic links are not allowed in a task tree")
            if stat.S_ISREG(mode):
                files.append((rel, path))
    files.sort()
    return files


def hash_tree(root: Path) -> tuple[str, list[list[object]]]:
    """sha256 over (path, executable bit, content hash) of every file, and the manifest."""
    outer = hashlib.sha256()
    manifest: list[list[object]] = []
    for rel, path in iter_tree(root):
        inner = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                inner.update(chunk)
        executable = bool(path.stat().st_mode & stat.S_IXUSR)
        outer.update(f"{rel}\0{int(executable)}\0{inner.hexdigest()}\n".encode())
        manifest.append([rel, path.stat().st_size])
    return "sha256:" + outer.hexdigest(), manifest


def tree_path(digest: str) -> Path:
    return store_root() / digest.removeprefix("sha256:")


def put_tree(root: Path) -> tuple[str, list[list[object]]]:
    """Copy root into the store (once per content) and return its hash and manifest."""
    digest, manifest = hash_tree(root)
    dest = tree_path(digest)
    if dest.exists():
        return digest, manifest
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the destination and rename, so a crash never leaves a half tree
    # under a name that claims complete content.
    tmp = Path(tempfile.mkdtemp(prefix=".incoming-", dir=dest.parent))
    try:
        for rel, path in iter_tree(root):
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        os.rename(tmp, dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not dest.exists():
            raise
    return digest, manifest


def read_tree_file(digest: str, rel: str, limit: int = 1 << 20) -> bytes:
    root = tree_path(digest).resolve()
    path = (root / rel).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise TreeError(f"{rel}: no such file in tree")
    with path.open("rb") as fh:
        return fh.read(limit)
