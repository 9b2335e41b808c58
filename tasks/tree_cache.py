"""Task trees across hosts: published to the object store, fetched by hash into a local LRU cache.

A worker host needs only the database, Redis and the storage settings: the first time it
runs a task it fetches the task's trees (`trees/<sha256>.tar`) into its own
`var/store/trees/`, the same place an import on this host would have put them, so everything
downstream (sandboxes, scoring, exports) reads a local directory as before.

What a fetched tree holds is checked, not trusted: the archive may contain only plain
folders and regular files under relative names, and the unpacked tree must hash to the
name it was asked for before it is renamed into place (core.artefacts: one rename wins when
two processes fetch the same tree). The cache is trimmed least recently used first above
CRUCIBLE_TREE_CACHE_BYTES, and only trees the object store also holds are ever dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from core.artefacts import ArtefactError, checked_members, drop, pack, staged
from core.objectstore import StoreError
from core.storage import object_store, remote_storage
from sandbox.environments import file_lock
from tasks.storage import TreeError, hash_tree, iter_tree, store_root, tree_path

# A tree used this recently is never dropped: a sandbox may be copying it right now.
EVICTION_GRACE_S = 600


def tree_key(digest: str) -> str:
    return f"trees/{digest.removeprefix('sha256:')}.tar"


def _meta_path(digest: str) -> Path:
    return store_root().parent / "tree-meta" / f"{digest.removeprefix('sha256:')}.json"


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    path = store_root().parent / "tree-cache.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path):
        yield


def _tree_bytes(root: Path) -> int:
    return sum(path.stat().st_size for _, path in iter_tree(root))


def _note(digest: str, remote: bool) -> None:
    """Record the tree's size and that it was used now (its mtime is the LRU clock)."""
    meta = _meta_path(digest)
    meta.parent.mkdir(parents=True, exist_ok=True)
    try:
        known = json.loads(meta.read_text())
    except (OSError, ValueError):
        known = {"bytes": _tree_bytes(tree_path(digest))}
    known["remote"] = bool(known.get("remote")) or remote
    fd, tmp = tempfile.mkstemp(dir=meta.parent, prefix=".meta-")
    with os.fdopen(fd, "w") as out:
        json.dump(known, out)
    os.replace(tmp, meta)


def publish_tree(digest: str) -> bool:
    """Upload a stored tree to the object store once; False when storage is local only."""
    if not remote_storage():
        return False
    store, key = object_store(), tree_key(digest)
    if not store.exists(key):
        with tempfile.TemporaryDirectory(prefix="crucible-tree-out-") as tmp:
            archive = Path(tmp) / "tree.tar"
            pack(archive, iter_tree(tree_path(digest)))  # the same tree always makes the same archive
            store.put_file(key, archive)
    _note(digest, remote=True)
    return True


def fetch_tree(digest: str) -> Path:
    """The local directory of tree `digest`, fetched from the object store when missing here."""
    local = tree_path(digest)
    if local.is_dir():
        if remote_storage():
            _note(digest, remote=False)  # a use: moves it to the back of the eviction line
        return local
    if not remote_storage():
        return local  # callers report the missing tree as before

    def fill(unpacked: Path) -> None:
        archive = unpacked.with_name("tree.tar")
        try:
            object_store().get_file(tree_key(digest), archive)
        except StoreError as exc:
            raise TreeError(f"tree {digest} is neither on this host nor in the object store ({exc})") from None
        unpacked.mkdir()
        with tarfile.open(archive) as tar:
            try:
                members = checked_members(tar, f"tree {digest}")
            except ArtefactError as exc:
                raise TreeError(str(exc)) from None
            tar.extractall(unpacked, members=members, filter="data")
        archive.unlink()
        got, _ = hash_tree(unpacked)
        if got.removeprefix("sha256:") != digest.removeprefix("sha256:"):
            raise TreeError(f"tree {digest}: the object store's copy hashes to {got}; refused")

    staged(local, fill, ready=Path.is_dir, lock=_cache_lock)
    _note(digest, remote=True)
    trim_cache()
    return local


def trim_cache(limit: int | None = None) -> list[str]:
    """Drop least recently used fetched trees until the cache fits; returns the dropped digests."""
    limit = settings.CRUCIBLE_TREE_CACHE_BYTES if limit is None else limit
    meta_dir = store_root().parent / "tree-meta"
    if not meta_dir.is_dir():
        return []
    dropped: list[str] = []
    with _cache_lock():
        entries = []
        for meta in meta_dir.glob("*.json"):
            try:
                info = json.loads(meta.read_text())
                entries.append((meta.stat().st_mtime, meta.stem, int(info["bytes"]), bool(info.get("remote"))))
            except (OSError, ValueError, KeyError):
                continue
        total = sum(size for _, _, size, _ in entries)
        now = time.time()
        for used, digest, size, remote in sorted(entries):
            if total <= limit:
                break
            if not remote or now - used < EVICTION_GRACE_S:
                continue  # the only copy, or possibly in use
            drop(tree_path(digest))
            _meta_path(digest).unlink(missing_ok=True)
            total -= size
            dropped.append(f"sha256:{digest}")
    return dropped
