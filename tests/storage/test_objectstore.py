"""One object-store interface, the same behaviour on the local disk and on a real S3 server."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.objectstore import LocalStore, ObjectStore, S3Store, StoreError, open_store
from tests.storage.conftest import S3Server


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return LocalStore(tmp_path / "objects")
    server: S3Server = request.getfixturevalue("s3_server")
    bucket_url: str = request.getfixturevalue("bucket_url")
    s3 = open_store(bucket_url, tmp_path, endpoint_url=server.endpoint)
    assert isinstance(s3, S3Store)
    s3.ensure_bucket()
    return s3


def test_objects_are_written_read_listed_and_deleted_whole(store: ObjectStore, tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(b"x" * (3 << 20) + b"end")
    store.put_file("trees/abc.tar", source)
    store.put_bytes("archives/batch-1.jsonl.gz", b"rows")
    assert store.exists("trees/abc.tar") and store.size("trees/abc.tar") == (3 << 20) + 3
    copy = tmp_path / "copy.bin"
    store.get_file("trees/abc.tar", copy)
    assert copy.read_bytes() == source.read_bytes()
    assert store.get_bytes("archives/batch-1.jsonl.gz") == b"rows"
    with store.open_read("archives/batch-1.jsonl.gz") as body:
        assert body.read() == b"rows"
    assert sorted(store.keys()) == ["archives/batch-1.jsonl.gz", "trees/abc.tar"]
    assert list(store.keys("trees/")) == ["trees/abc.tar"]
    store.delete("trees/abc.tar")
    assert not store.exists("trees/abc.tar")
    with pytest.raises(StoreError, match="no such object"):
        store.get_bytes("trees/abc.tar")
    with pytest.raises(StoreError, match="no such object"):
        store.size("trees/abc.tar")


@pytest.mark.parametrize("key", ["../escape", "/abs", "a//b", "a/../b", "", ".hidden/x", "a/b/"])
def test_a_key_that_could_climb_out_of_the_store_is_refused(store: ObjectStore, key: str) -> None:
    with pytest.raises(StoreError, match="not a valid object key"):
        store.put_bytes(key, b"x")


def test_storage_urls_name_their_backend(tmp_path: Path) -> None:
    assert isinstance(open_store("", tmp_path), LocalStore)
    assert open_store(f"file://{tmp_path}/o", tmp_path).url == f"{tmp_path}/o"
    for bad, message in (("s3:///prefix", "needs a bucket"), ("ftp://host/x", "storage URLs are")):
        with pytest.raises(StoreError, match=message):
            open_store(bad, tmp_path)
