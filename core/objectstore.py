"""Where Crucible keeps bytes that outlive a process: the local disk, or any S3-compatible store.

Plain Python (a worker host or a training subprocess uses it without Django). One small
interface over two real backends:

- `LocalStore(root)`: files under a folder, the default (`var/objects/`);
- `S3Store(bucket, prefix)`: AWS S3, MinIO, SeaweedFS, Ceph RGW... through boto3.

`open_store(url)` picks one from `CRUCIBLE_STORAGE_URL`: empty or a path for the local disk,
`s3://bucket/prefix` for S3, with the endpoint and credentials from the usual variables
(`AWS_ENDPOINT_URL` or `CRUCIBLE_S3_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`).

Keys are relative slash-separated names made by Crucible itself (`trees/<sha256>.tar`,
`archives/batch-<id>.jsonl.gz`); a key that could climb out of the store is refused.
Writes are whole-object and atomic on both backends: a reader never sees half an object.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import urlsplit

__all__ = ["LocalStore", "ObjectStore", "S3Store", "StoreError", "open_store"]

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")
_CHUNK = 1 << 20


class StoreError(RuntimeError):
    pass


def check_key(key: str) -> str:
    if not _KEY.match(key) or ".." in key.split("/"):
        raise StoreError(f"{key!r} is not a valid object key")
    return key


class ObjectStore(Protocol):
    @property
    def url(self) -> str: ...

    def put_file(self, key: str, path: Path) -> None: ...
    def put_bytes(self, key: str, data: bytes) -> None: ...
    def get_file(self, key: str, dest: Path) -> None: ...
    def get_bytes(self, key: str) -> bytes: ...
    def open_read(self, key: str) -> IO[bytes]: ...
    def exists(self, key: str) -> bool: ...
    def size(self, key: str) -> int: ...
    def delete(self, key: str) -> None: ...
    def keys(self, prefix: str = "") -> Iterator[str]: ...


@dataclass
class LocalStore:
    root: Path

    @property
    def url(self) -> str:
        return str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put_file(self, key: str, path: Path) -> None:
        with path.open("rb") as source:
            self._put_stream(key, source)

    def put_bytes(self, key: str, data: bytes) -> None:
        self._put_stream(key, io.BytesIO(data))

    def _put_stream(self, key: str, source: IO[bytes]) -> None:
        target = self._path(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".part-")
        except OSError as exc:
            raise StoreError(f"{key}: cannot write to {self.url} ({exc.strerror})") from None
        try:
            with os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(source, out, _CHUNK)
            os.replace(tmp, target)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise StoreError(f"{key}: cannot write to {self.url} ({exc.strerror})") from None
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get_file(self, key: str, dest: Path) -> None:
        try:
            shutil.copyfile(self._path(key), dest)
        except FileNotFoundError:
            raise StoreError(f"{key}: no such object in {self.url}") from None

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise StoreError(f"{key}: no such object in {self.url}") from None

    def open_read(self, key: str) -> IO[bytes]:
        try:
            return self._path(key).open("rb")
        except FileNotFoundError:
            raise StoreError(f"{key}: no such object in {self.url}") from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def size(self, key: str) -> int:
        try:
            return self._path(key).stat().st_size
        except FileNotFoundError:
            raise StoreError(f"{key}: no such object in {self.url}") from None

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def keys(self, prefix: str = "") -> Iterator[str]:
        if not self.root.is_dir():
            return
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.name.startswith(".part-"):
                key = path.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    yield key


class S3Store:
    """A bucket (and key prefix) on any S3-compatible server."""

    def __init__(self, bucket: str, prefix: str = "", client: Any = None, endpoint_url: str | None = None) -> None:
        if client is None:
            import boto3
            from botocore.config import Config

            client = boto3.client(
                "s3",
                endpoint_url=endpoint_url or None,
                # Path-style addressing: MinIO, SeaweedFS and Ceph on one host name all take it.
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5, "mode": "standard"}),
            )
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}".rstrip("/")

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _missing(self, exc: Exception) -> bool:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        return code in {"404", "NoSuchKey", "NotFound"}

    def ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError:
            self.client.create_bucket(Bucket=self.bucket)

    def put_file(self, key: str, path: Path) -> None:
        with self._errors(key):
            self.client.upload_file(str(path), self.bucket, self._key(key))

    def put_bytes(self, key: str, data: bytes) -> None:
        with self._errors(key):
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    @contextlib.contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        """Transport and server failures as one StoreError that names the object."""
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except ClientError as exc:
            if self._missing(exc):
                raise StoreError(f"{key}: no such object in {self.url}") from None
            raise StoreError(f"{key}: {self.url} refused: {exc}") from None
        except (BotoCoreError, Boto3Error) as exc:
            raise StoreError(f"{key}: {self.url} unreachable or failing: {exc}") from None

    def get_file(self, key: str, dest: Path) -> None:
        with self._errors(key):
            self.client.download_file(self.bucket, self._key(key), str(dest))

    def get_bytes(self, key: str) -> bytes:
        with self.open_read(key) as body:
            return body.read()

    def open_read(self, key: str) -> IO[bytes]:
        with self._errors(key):
            body: IO[bytes] = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        return body

    def exists(self, key: str) -> bool:
        try:
            self.size(key)
        except StoreError:
            return False
        return True

    def size(self, key: str) -> int:
        with self._errors(key):
            return int(self.client.head_object(Bucket=self.bucket, Key=self._key(key))["ContentLength"])

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def keys(self, prefix: str = "") -> Iterator[str]:
        if ".." in prefix.split("/") or prefix.startswith("/"):
            raise StoreError(f"{prefix!r} is not a valid key prefix")
        full = f"{self.prefix}/{prefix}" if self.prefix else prefix
        strip = len(f"{self.prefix}/") if self.prefix else 0
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
            for item in page.get("Contents", []):
                yield str(item["Key"])[strip:]


def open_store(url: str, default_root: Path, endpoint_url: str | None = None) -> ObjectStore:
    """The store `url` names: "" (the local default), a path, file:///path or s3://bucket/prefix."""
    if not url:
        return LocalStore(default_root)
    parts = urlsplit(url)
    if parts.scheme == "s3":
        if not parts.netloc:
            raise StoreError(f"{url}: an s3:// URL needs a bucket (s3://bucket/prefix)")
        return S3Store(parts.netloc, parts.path, endpoint_url=endpoint_url)
    if parts.scheme in ("", "file"):
        return LocalStore(Path(parts.path if parts.scheme else url))
    raise StoreError(f"{url}: storage URLs are a path, file:///path or s3://bucket/prefix")
