"""Exports kept in the object store: written by one host, downloaded whole from any other.

`POST /api/v1/exports/<kind>/` and `manage.py export --to-store` write an export to the
deployment's object store (the local `var/objects/` by default, the S3 bucket when
CRUCIBLE_STORAGE_URL is set) as `exports/<kind>/<id>-<format>[-unredacted].<ext>`;
`GET /api/v1/exports/stored/<kind>/<name>/` streams it back from whichever web host answers,
in chunks (never whole in memory). `manage.py export --out s3://bucket/key` writes one to a
bucket named on the command line. A directory-shaped export (hf) is stored as the same tar
the API streams.

The export is spooled to a local temporary file first and uploaded whole, so the store never
holds half an export under its key (as `--out FILE` never leaves half a file under its name).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from core.objectstore import ObjectStore
from webapp.export_kinds import CONTENT_TYPES, EXTENSIONS, KINDS, Export

CHUNK = 1 << 20
UNREDACTED = "-unredacted"
# The name part of a stored export's key, as this module makes it: nothing a client can bend.
_NAME = re.compile(r"^(?P<id>[0-9a-f]{32})-(?P<format>[a-z][a-z-]*?)(?P<unredacted>-unredacted)?(?P<ext>\.[a-z]+)$")


@dataclass(frozen=True)
class StoredExport:
    key: str
    bytes: int
    sha256: str

    @property
    def kind(self) -> str:
        return self.key.split("/")[1]

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[1]


def stored_key(export: Export) -> str:
    marker = "" if export.redacted else UNREDACTED
    return f"exports/{export.kind}/{uuid.uuid4().hex}-{export.format}{marker}{Path(export.filename).suffix}"


def write_to_store(pieces: Iterable[bytes], store: ObjectStore, key: str) -> StoredExport:
    """Write the export's bytes to `store` under `key`, all or nothing."""
    digest, size = hashlib.sha256(), 0
    with tempfile.TemporaryDirectory(prefix="crucible-export-") as tmp:
        spooled = Path(tmp) / "export"
        with spooled.open("wb") as out:
            for piece in pieces:
                out.write(piece)
                digest.update(piece)
                size += len(piece)
        store.put_file(key, spooled)
    return StoredExport(key=key, bytes=size, sha256=digest.hexdigest())


@dataclass(frozen=True)
class StoredName:
    key: str
    unredacted: bool
    content_type: str


def parse_stored(kind: str, name: str) -> StoredName | None:
    """The stored export a download names, or None when no export of ours could have that name."""
    match = _NAME.match(name)
    if kind not in KINDS or match is None:
        return None
    ext = match["ext"]
    encoding = next((encoding for encoding, suffix in EXTENSIONS.items() if suffix == ext), None)
    if encoding is None:
        return None
    return StoredName(f"exports/{kind}/{name}", bool(match["unredacted"]), CONTENT_TYPES[encoding])


def read_chunks(store: ObjectStore, key: str) -> tuple[int, Iterator[bytes]]:
    """The stored export's size and its bytes in chunks; StoreError before any byte when it is missing."""
    size = store.size(key)
    body = store.open_read(key)
    return size, _chunks(body)


def _chunks(body: IO[bytes]) -> Iterator[bytes]:
    try:
        while chunk := body.read(CHUNK):
            yield chunk
    finally:
        body.close()
