"""Checkpoints across hosts: uploaded to the object store when saved, fetched by hash where needed.

The trainer saves a checkpoint on its GPU host; a rollout worker on a CPU host, `serve_checkpoint`,
an evaluation or a reward spec's learned component may run anywhere else. With remote storage
configured (CRUCIBLE_STORAGE_URL) the launcher uploads each checkpoint directory as
`checkpoints/<id>/blobs/<sha256>` (one object per distinct file content, so keys never carry
file names a store might refuse) plus `checkpoints/<id>/manifest.json`, which lists every file's
relative path, size and SHA-256. The manifest's own SHA-256 goes into the Checkpoint row: the
database, not the store, says what the checkpoint holds, so a tampered manifest or blob is refused.

`local_checkpoint(checkpoint)` is the one way a host gets a directory it can load: the saving
host's own directory when it is here, else a verified copy in
`var/checkpoints/<manifest sha256>/<name>`, put in place in one rename (core.artefacts: of two
processes fetching the same checkpoint one rename wins, and the other uses the winner's copy).
Without remote storage nothing is uploaded and the saved path is used as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path, PurePosixPath
from typing import TypedDict

from django.conf import settings

from core.artefacts import staged
from core.objectstore import StoreError
from core.storage import object_store, remote_storage, sha256_file
from training.models import Checkpoint
from training.trainers.resume import is_state_file

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 1
_CHUNK = 1 << 20


class CheckpointStoreError(RuntimeError):
    pass


class ManifestFile(TypedDict):
    path: str
    bytes: int
    sha256: str


class Manifest(TypedDict):
    version: int
    checkpoint: int
    name: str  # the saved directory's name (checkpoint-40): a fetched copy keeps it
    files: list[ManifestFile]


def manifest_key(checkpoint_id: int) -> str:
    return f"checkpoints/{checkpoint_id}/manifest.json"


def blob_key(checkpoint_id: int, sha256: str) -> str:
    return f"checkpoints/{checkpoint_id}/blobs/{sha256}"


def cache_root() -> Path:
    return Path(settings.VAR_DIR) / "checkpoints"


def _manifest_for(checkpoint: Checkpoint, root: Path) -> Manifest:
    files: list[ManifestFile] = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise CheckpointStoreError(f"checkpoint {checkpoint.pk}: {path} is a link; a checkpoint holds plain files")
        # The optimizer's state (twice the model) stays on the host that trains on: another host
        # serves, evaluates or fine-tunes the weights, and resumes from them alone.
        if path.is_file() and not (path.parent == root and is_state_file(path.name)):
            rel = path.relative_to(root).as_posix()
            files.append({"path": rel, "bytes": path.stat().st_size, "sha256": sha256_file(path)})
    if not files:
        raise CheckpointStoreError(f"checkpoint {checkpoint.pk}: {root} holds no files")
    return {"version": MANIFEST_VERSION, "checkpoint": checkpoint.pk, "name": root.name, "files": files}


def publish_checkpoint(checkpoint: Checkpoint) -> bool:
    """Upload the checkpoint's directory and record its manifest's hash; False when storage is local only.

    Blobs go up before the manifest, and the row learns the manifest's hash last, so no host
    ever sees a checkpoint as fetchable before all of it is in the store.
    """
    if not remote_storage():
        return False
    root = Path(checkpoint.path)
    if not root.is_dir():
        raise CheckpointStoreError(f"checkpoint {checkpoint.pk}: no directory at {checkpoint.path} to upload")
    started = time.monotonic()
    manifest = _manifest_for(checkpoint, root)
    store = object_store()
    uploaded: set[str] = set()
    for entry in manifest["files"]:
        key = blob_key(checkpoint.pk, entry["sha256"])
        if key not in uploaded:
            store.put_file(key, root / entry["path"])
            uploaded.add(key)
    body = json.dumps(manifest, indent=1, sort_keys=True).encode()
    store.put_bytes(manifest_key(checkpoint.pk), body)
    digest = hashlib.sha256(body).hexdigest()
    Checkpoint.objects.filter(pk=checkpoint.pk).update(manifest_sha256=digest)
    checkpoint.manifest_sha256 = digest
    logger.info(
        "checkpoint %s uploaded to %s: %d files, %d bytes in %.1f s",
        checkpoint.pk,
        store.url,
        len(manifest["files"]),
        sum(entry["bytes"] for entry in manifest["files"]),
        time.monotonic() - started,
    )
    return True


def _checked_manifest(checkpoint: Checkpoint, body: bytes) -> Manifest:
    got = hashlib.sha256(body).hexdigest()
    if got != checkpoint.manifest_sha256:
        raise CheckpointStoreError(
            f"checkpoint {checkpoint.pk}: the object store's manifest hashes to {got}, "
            f"not the recorded {checkpoint.manifest_sha256}; refused"
        )
    # The hash matched what this database recorded at upload, so the content is ours; the
    # shape is still checked, as a manifest written by an older or broken uploader could be odd.
    try:
        manifest: Manifest = json.loads(body)
        files = manifest["files"]
        name = manifest["name"]
        for entry in files:
            rel = PurePosixPath(entry["path"])
            if rel.is_absolute() or ".." in rel.parts or not rel.parts or len(entry["sha256"]) != 64:
                raise ValueError(f"file entry {entry['path']!r}")
        if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
            raise ValueError(f"name {name!r}")
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointStoreError(f"checkpoint {checkpoint.pk}: its manifest is malformed ({exc}); refused") from None
    return manifest


def _download(checkpoint: Checkpoint, entry: ManifestFile, dest: Path) -> None:
    digest = hashlib.sha256()
    size = 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    with object_store().open_read(blob_key(checkpoint.pk, entry["sha256"])) as body, dest.open("wb") as out:
        while chunk := body.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    if digest.hexdigest() != entry["sha256"] or size != entry["bytes"]:
        raise CheckpointStoreError(
            f"checkpoint {checkpoint.pk}: {entry['path']} from the object store hashes to {digest.hexdigest()} "
            f"({size} bytes), not {entry['sha256']} ({entry['bytes']} bytes); refused"
        )


def local_checkpoint(checkpoint: Checkpoint) -> Path:
    """A directory on this host that from_pretrained can load: the saved one, or a verified fetched copy."""
    saved = Path(checkpoint.path)
    if saved.is_dir():
        return saved
    if not remote_storage():
        return saved  # callers report the missing directory as before
    if not checkpoint.manifest_sha256:
        raise CheckpointStoreError(
            f"checkpoint {checkpoint.pk} is not on this host ({checkpoint.path}) and was never uploaded "
            "to the object store"
        )
    home = cache_root() / checkpoint.manifest_sha256
    if home.is_dir():
        found = [child for child in home.iterdir() if child.is_dir()]
        if len(found) == 1:
            return found[0]
    started = time.monotonic()
    manifest: Manifest | None = None

    def fill(incoming: Path) -> None:
        nonlocal manifest
        try:
            manifest = _checked_manifest(checkpoint, object_store().get_bytes(manifest_key(checkpoint.pk)))
            for entry in manifest["files"]:
                _download(checkpoint, entry, incoming / manifest["name"] / entry["path"])
        except StoreError as exc:
            raise CheckpointStoreError(f"checkpoint {checkpoint.pk}: cannot fetch it ({exc})") from None

    # The whole folder in one rename: a loader never sees half a checkpoint under the name.
    if staged(home, fill, ready=Path.is_dir):
        logger.info("checkpoint %s fetched into %s in %.1f s", checkpoint.pk, home, time.monotonic() - started)
    assert manifest is not None
    return home / manifest["name"]


def checkpoint_for_model(model: str) -> Checkpoint | None:
    """The registered checkpoint a policy's model path names (a batch records the saving host's path)."""
    if not model.startswith("/"):
        return None
    return Checkpoint.objects.filter(path=model).order_by("-id").first()


def resolve_model(model: str) -> str | None:
    """The local directory for a checkpoint path this host lacks; None when `model` is no such checkpoint."""
    if Path(model).is_dir() or not remote_storage():
        return None
    checkpoint = checkpoint_for_model(model)
    if checkpoint is None:
        return None
    return str(local_checkpoint(checkpoint))


def is_fetchable(checkpoint: Checkpoint) -> bool:
    """Cheap (no download): whether this host could fetch the checkpoint from the object store."""
    return remote_storage() and bool(checkpoint.manifest_sha256)


def model_is_fetchable(model: str) -> bool:
    """Whether a model path this host lacks is a checkpoint the object store holds."""
    if not remote_storage():
        return False
    checkpoint = checkpoint_for_model(model)
    return checkpoint is not None and is_fetchable(checkpoint)
