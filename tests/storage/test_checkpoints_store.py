"""Checkpoints between hosts with no shared disk: uploaded when saved, fetched by hash, tampering refused."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import pytest
from pytest_django import Settings

from core.storage import object_store
from core.vocabulary import CheckpointKind
from tests.helpers import running_run
from training import checkpoint_store
from training.checkpoint_store import CheckpointStoreError, local_checkpoint
from training.launcher import RunFollower
from training.models import Checkpoint, TrainingRun
from training.serving import policy_checkpoint
from trajectories.policies.base import PolicyError
from trajectories.policies.registry import policy_registry

pytestmark = pytest.mark.django_db


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _saved_by_the_trainer(settings: Settings, kind: str = CheckpointKind.POLICY) -> Checkpoint:
    """A checkpoint directory as the trainer leaves it, reported through the launcher's own handler."""
    run = TrainingRun.objects.create(kind="sft", name="tiny", config={"model": {"base_model": "base"}})
    path = Path(settings.VAR_DIR) / "runs" / str(run.pk) / "output" / "checkpoint-2"
    (path / "nested").mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 8}))
    (path / "model.safetensors").write_bytes(os.urandom(300_000))
    (path / "tokenizer.json").write_text('{"version": "1.0"}')
    (path / "copy.json").write_text('{"version": "1.0"}')  # the same content twice: one blob
    (path / "nested" / "_extra.bin").write_bytes(b"\x00\x01" * 10)  # a name no object key could carry
    RunFollower(run, running_run(run)).line(
        "out", json.dumps({"event": "checkpoint", "step": 2, "path": str(path), "kind": kind})
    )
    return Checkpoint.objects.get(run=run)


def test_a_checkpoint_saved_on_one_host_loads_on_another(settings: Settings, shared_store: Path) -> None:
    checkpoint = _saved_by_the_trainer(settings)
    saved = Path(checkpoint.path)
    assert len(checkpoint.manifest_sha256) == 64
    manifest = object_store().get_bytes(checkpoint_store.manifest_key(checkpoint.pk))
    assert hashlib.sha256(manifest).hexdigest() == checkpoint.manifest_sha256
    assert len(set(object_store().keys(f"checkpoints/{checkpoint.pk}/blobs/"))) == 4  # 5 files, 4 contents
    assert local_checkpoint(checkpoint) == saved  # the saving host uses its own directory

    settings.VAR_DIR = shared_store / "host-b"  # a second host: its own var/, nothing shared
    os.rename(saved.parents[3], shared_store / "host-a-gone")  # ...and host A's files out of reach
    fetched = local_checkpoint(Checkpoint.objects.get(pk=checkpoint.pk))

    assert fetched.is_relative_to(shared_store / "host-b") and fetched.name == "checkpoint-2"
    assert _files(fetched) == _files(shared_store / "host-a-gone" / saved.relative_to(shared_store / "host-a"))
    assert local_checkpoint(checkpoint) == fetched  # a second use is local
    # serve_checkpoint and the hf policy's preflight find it through the same function.
    assert policy_checkpoint(str(checkpoint.pk)).pk == checkpoint.pk
    assert policy_registry.preflight("hf", checkpoint.path) is None
    assert policy_registry.local_model(checkpoint.path) == str(fetched)


def test_concurrent_fetches_leave_one_complete_copy(settings: Settings, shared_store: Path) -> None:
    checkpoint = _saved_by_the_trainer(settings)
    settings.VAR_DIR = shared_store / "host-c"
    checkpoint.path = "/nowhere/on/this/host/checkpoint-2"
    results: list[Path | BaseException] = []

    def fetch() -> None:
        try:
            results.append(local_checkpoint(checkpoint))
        except BaseException as exc:  # reported below, with the rest
            results.append(exc)

    threads = [threading.Thread(target=fetch) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    home = checkpoint_store.cache_root() / checkpoint.manifest_sha256
    assert results == [home / "checkpoint-2"] * 4
    assert sorted(p.name for p in checkpoint_store.cache_root().iterdir()) == [checkpoint.manifest_sha256]
    assert _files(home / "checkpoint-2") == _files(Path(Checkpoint.objects.get(pk=checkpoint.pk).path))


def test_a_tampered_blob_or_manifest_is_refused_not_loaded(settings: Settings, shared_store: Path) -> None:
    checkpoint = _saved_by_the_trainer(settings)
    original = Path(checkpoint.path)
    weights = hashlib.sha256((original / "model.safetensors").read_bytes()).hexdigest()
    store = object_store()
    blob = checkpoint_store.blob_key(checkpoint.pk, weights)
    good = store.get_bytes(blob)
    store.put_bytes(blob, good[:-1] + bytes([good[-1] ^ 1]))  # one bit flipped
    settings.VAR_DIR = shared_store / "host-d"
    checkpoint.path = "/nowhere/checkpoint-2"

    with pytest.raises(CheckpointStoreError, match="model.safetensors from the object store hashes to"):
        local_checkpoint(checkpoint)
    assert not checkpoint_store.cache_root().exists() or list(checkpoint_store.cache_root().iterdir()) == []
    # An hf rollout asking for it fails as a policy that could not start, not with a half-loaded model.
    Checkpoint.objects.filter(pk=checkpoint.pk).update(path=checkpoint.path)
    with pytest.raises(PolicyError, match="hashes to"):
        policy_registry.local_model(checkpoint.path)

    # A manifest rewritten to vouch for the tampered blob does not match the database's record.
    store.put_bytes(blob, good)
    manifest = json.loads(store.get_bytes(checkpoint_store.manifest_key(checkpoint.pk)))
    manifest["files"] = [{**f, "path": "../../escape"} if f["sha256"] == weights else f for f in manifest["files"]]
    store.put_bytes(checkpoint_store.manifest_key(checkpoint.pk), json.dumps(manifest).encode())
    with pytest.raises(CheckpointStoreError, match="manifest hashes to"):
        local_checkpoint(checkpoint)
    assert not (shared_store / "escape").exists()


def test_without_remote_storage_nothing_is_uploaded_and_paths_are_as_saved(settings: Settings, tmp_path: Path) -> None:
    settings.CRUCIBLE_STORAGE_URL = ""
    settings.VAR_DIR = tmp_path / "only-host"
    checkpoint = _saved_by_the_trainer(settings)
    assert checkpoint.manifest_sha256 == ""
    assert local_checkpoint(checkpoint) == Path(checkpoint.path)
    assert not (tmp_path / "only-host" / "objects").exists()
    missing = Checkpoint(pk=checkpoint.pk, path="/gone/checkpoint-2")
    assert local_checkpoint(missing) == Path("/gone/checkpoint-2")  # reported missing by the caller, as before


def test_a_checkpoint_never_uploaded_is_named_as_such_on_another_host(settings: Settings, shared_store: Path) -> None:
    checkpoint = _saved_by_the_trainer(settings)
    Checkpoint.objects.filter(pk=checkpoint.pk).update(manifest_sha256="")
    settings.VAR_DIR = shared_store / "host-e"
    lost = Checkpoint.objects.get(pk=checkpoint.pk)
    lost.path = "/elsewhere/checkpoint-2"
    with pytest.raises(CheckpointStoreError, match="never uploaded"):
        local_checkpoint(lost)
