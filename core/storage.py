"""The deployment's object store, as settings name it (see core.objectstore)."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from core.objectstore import ObjectStore, S3Store, StoreError, check_key, open_store


@cache
def _store(url: str, var_dir: str, endpoint: str) -> ObjectStore:
    store = open_store(url, Path(var_dir) / "objects", endpoint_url=endpoint or None)
    if isinstance(store, S3Store):
        store.ensure_bucket()
    return store


def object_store() -> ObjectStore:
    """One store per setting values: tests that change the settings get a fresh one."""
    return _store(settings.CRUCIBLE_STORAGE_URL, str(settings.VAR_DIR), settings.CRUCIBLE_S3_ENDPOINT_URL)


def remote_storage() -> bool:
    """Whether hosts share files through the object store rather than a shared var/."""
    return bool(settings.CRUCIBLE_STORAGE_URL)


def store_and_key(url: str) -> tuple[ObjectStore, str]:
    """The store and key an explicit `s3://bucket/key` names (an export's `--out`), on the deployment's endpoint.

    The bucket must exist: a typo in a bucket name is an error, not a new bucket.
    """
    parts = urlsplit(url)
    key = parts.path.strip("/")
    if parts.scheme != "s3" or not parts.netloc or not key:
        raise StoreError(f"{url}: expected s3://bucket/key")
    check_key(key)
    return S3Store(parts.netloc, "", endpoint_url=settings.CRUCIBLE_S3_ENDPOINT_URL or None), key


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
