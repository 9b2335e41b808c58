"""Task trees between hosts with no shared disk: published once, fetched by hash, checked, trimmed."""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
from pathlib import Path

import pytest
from pytest_django import Settings

from core.storage import object_store
from tasks import tree_cache
from tasks.storage import TreeError, hash_tree, put_tree, tree_path
from tests.conftest import DEMO


def test_a_tree_stored_on_one_host_is_fetched_whole_by_another(settings: Settings, shared_store: Path) -> None:
    digest, _ = put_tree(DEMO / "tasks" / "task_0001" / "repo_snapshot")
    assert tree_cache.publish_tree(digest)
    settings.VAR_DIR = shared_store / "host-b"  # a second host: its own var/, nothing shared
    assert not tree_path(digest).exists()

    fetched = tree_cache.fetch_tree(digest)

    assert fetched == tree_path(digest) and hash_tree(fetched)[0] == digest
    assert (fetched / "calc" / "__init__.py").is_file() or any(fetched.rglob("*.py"))
    assert tree_cache.fetch_tree(digest) == fetched  # a second use is local


def test_concurrent_fetches_of_one_tree_leave_one_complete_copy(settings: Settings, shared_store: Path) -> None:
    digest, _ = put_tree(DEMO / "tasks" / "task_0002" / "repo_snapshot")
    tree_cache.publish_tree(digest)
    settings.VAR_DIR = shared_store / "host-c"
    results: list[Path | BaseException] = []

    def fetch() -> None:
        try:
            results.append(tree_cache.fetch_tree(digest))
        except BaseException as exc:  # reported below, with the rest
            results.append(exc)

    threads = [threading.Thread(target=fetch) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [tree_path(digest)] * 4
    assert hash_tree(tree_path(digest))[0] == digest
    leftovers = [p.name for p in tree_path(digest).parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def _upload_archive(digest: str, members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data else None)
    object_store().put_bytes(tree_cache.tree_key(digest), buffer.getvalue())


def test_a_tampered_or_hostile_tree_in_the_store_is_refused(settings: Settings, shared_store: Path) -> None:
    digest, _ = put_tree(DEMO / "tasks" / "task_0003" / "repo_snapshot")
    settings.VAR_DIR = shared_store / "host-d"
    changed = tarfile.TarInfo("calc.py")
    changed.size = 5
    _upload_archive(digest, [(changed, b"evil\n")])
    with pytest.raises(TreeError, match="hashes to"):
        tree_cache.fetch_tree(digest)
    link = tarfile.TarInfo("secret")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    _upload_archive(digest, [(link, b"")])
    with pytest.raises(TreeError, match="'secret', which is not a file or folder"):
        tree_cache.fetch_tree(digest)
    climb = tarfile.TarInfo("../outside.py")
    climb.size = 1
    _upload_archive(digest, [(climb, b"x")])
    with pytest.raises(TreeError, match="'../outside.py', outside the archive"):
        tree_cache.fetch_tree(digest)
    assert not tree_path(digest).exists() and not (shared_store / "host-d" / "store" / "outside.py").exists()
    with pytest.raises(TreeError, match="neither on this host nor in the object store"):
        tree_cache.fetch_tree("0" * 64)


def test_the_cache_drops_the_least_recently_used_fetched_trees_first(
    settings: Settings, shared_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digests = [put_tree(DEMO / "tasks" / name / "repo_snapshot")[0] for name in ("task_0001", "task_0002")]
    for digest in digests:
        tree_cache.publish_tree(digest)
    settings.VAR_DIR = shared_store / "host-e"
    local_only, _ = put_tree(DEMO / "tasks" / "task_0003" / "repo_snapshot")  # imported here, never published
    tree_cache.fetch_tree(local_only)  # noted as used, but the store does not hold it
    older, newer = (tree_cache.fetch_tree(d) for d in digests)
    past = time.time() - 3600
    os.utime(tree_cache._meta_path(digests[0]), (past, past))
    monkeypatch.setattr(tree_cache, "EVICTION_GRACE_S", 60)

    dropped = tree_cache.trim_cache(limit=1)

    # The recently used tree is kept (a sandbox may be copying it); the only copy is kept always.
    assert dropped == [digests[0]] and not older.exists()
    assert newer.exists() and tree_path(local_only).exists()
    assert tree_cache.fetch_tree(digests[0]).is_dir()  # fetched again on the next use
