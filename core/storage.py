"""The deployment's object store, as settings name it (see core.objectstore)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from django.conf import settings

from core.objectstore import ObjectStore, S3Store, open_store


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
