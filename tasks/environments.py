"""Verbs for repository environments: detect one for a task, build it, keep a record for the suite page,
and share it with hosts that have not built it through the object store."""

from __future__ import annotations

import json
import logging
import os
import posixpath
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.artefacts import ArtefactError, checked_members, staged
from core.storage import object_store, remote_storage, sha256_file
from sandbox.environments import EnvBuildError, Environment, EnvSpec, ensure_environment, load_environment
from tasks.builders.environment import detect_environment
from tasks.models import Task, TaskEnvironment

logger = logging.getLogger(__name__)

LOG_CHARS = 20_000


@dataclass
class Prepared:
    """An environment build's outcome: the environment, or why there is none."""

    spec: EnvSpec
    environment: Environment | None
    error: str = ""

    def label(self) -> str:
        return f"environment {self.spec.spec_hash()}"

    def line(self) -> str:
        if self.environment is None:
            return f"{self.label()} cannot be built: {self.error}"
        env = self.environment
        how = f"built in {env.build_seconds:.1f} s" if env.built_now else "reused from the cache"
        return f"{self.label()} ({env.key}): {len(env.lock)} packages, {env.size_bytes / 1e6:.1f} MB, {how}"


def prepare_environment(spec: EnvSpec, repo: str = "", *, rebuild: bool = False, allow_sdist: bool = False) -> Prepared:
    """Build (or find) the environment for `spec` and record the outcome; a failure is returned, not raised."""
    try:
        env = ensure_environment(spec, rebuild=rebuild, allow_sdist=allow_sdist)
    except (EnvBuildError, OSError) as exc:
        logger.warning("environment %s for %s cannot be built: %s", spec.spec_hash(), repo or "?", exc)
        record(spec, None, repo, str(exc))
        return Prepared(spec, None, str(exc))
    row = record(spec, env, repo)
    try:
        publish_environment(env, row)
    except (OSError, ValueError) as exc:
        # The environment works here; other hosts install it themselves instead of fetching it.
        logger.warning("environment %s could not be put into the object store: %s", env.key, exc)
    return Prepared(spec, env)


def archive_key(key: str) -> str:
    return f"environments/{key}.tar.gz"


def publish_environment(env: Environment, row: TaskEnvironment) -> None:
    """With hosts sharing no disk, put the built environment into the object store, its hash on the row."""
    if not remote_storage() or row.archive_sha256:
        return
    with tempfile.TemporaryDirectory(prefix="crucible-env-archive-") as tmp:
        archive = Path(tmp) / "env.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(str(env.path), arcname=env.key)
        digest = sha256_file(archive)
        object_store().put_file(archive_key(env.key), archive)
        row.archive_sha256, row.archive_bytes = digest, archive.stat().st_size
    row.save(update_fields=["archive_sha256", "archive_bytes", "updated_at"])
    logger.info("environment %s put into the object store (%d bytes)", env.key, row.archive_bytes)


def fetch_environment(spec: EnvSpec, root: Path) -> Path | None:
    """An environment another host built and published, fetched by its key and checked by the row's hash.

    Registered with sandbox.environments (tasks.apps): a worker host without the registry, or
    without the time to install, gets the same bytes the building host had. A changed archive,
    or one whose members would land outside the environment or link anywhere but the base
    interpreter, is refused and the caller installs instead.
    """
    if not remote_storage():
        return None
    row = TaskEnvironment.objects.filter(spec_hash=spec.spec_hash(), built=True).exclude(archive_sha256="").first()
    if row is None:
        return None
    target = root / row.key
    if load_environment(target) is not None:
        return target

    def fill(out: Path) -> None:
        archive = out.with_name("env.tar.gz")
        object_store().get_file(archive_key(row.key), archive)
        if sha256_file(archive) != row.archive_sha256:
            raise ValueError(f"environments/{row.key}.tar.gz does not match the hash recorded when it was published")
        with tarfile.open(archive, "r:gz") as tar:
            members = archive_members(tar, row.key)
            tar.extractall(out.parent / "unpacked", members=members, filter="tar")  # noqa: S202 - checked above
        os.rename(out.parent / "unpacked" / row.key, out)

    staged(target, fill, ready=lambda path: load_environment(path) is not None)
    return target


def archive_members(tar: tarfile.TarFile, key: str) -> list[tarfile.TarInfo]:
    """The members of environment `key`'s archive, all under `key/`; its links stay inside it, or
    are the venv's links to the interpreter it was made from (bin/python), and nowhere else."""
    base = os.path.realpath(sys.base_prefix)

    def link_check(member: tarfile.TarInfo) -> str | None:
        if posixpath.isabs(member.linkname) and not os.path.realpath(member.linkname).startswith(base + os.sep):
            return "points outside the interpreter"
        return None

    try:
        return checked_members(tar, f"environment {key}", root=key, link_check=link_check)
    except ArtefactError as exc:
        raise ValueError(str(exc)) from None


def record(spec: EnvSpec, env: Environment | None, repo: str = "", error: str = "") -> TaskEnvironment:
    values: dict[str, object] = {"spec": spec.to_json(), "built": env is not None, "error": error[:LOG_CHARS]}
    if repo:
        values["repo"] = repo[:200]
    if env is not None:
        values |= {
            "key": env.key,
            "lock": list(env.lock),
            "size_bytes": env.size_bytes,
            "build_seconds": env.build_seconds,
            "log": env.log()[-LOG_CHARS:],
        }
    row, _ = TaskEnvironment.objects.update_or_create(spec_hash=spec.spec_hash(), defaults=values)
    return row


def attach_environment(
    task_dir: Path, pytest: str = "", repo: str = "", variables: Sequence[tuple[str, str]] = ()
) -> Prepared | None:
    """Name the environment a built task directory's snapshot needs in its metadata.json, and build it.

    None when the bare runner is enough. A spec that cannot even be detected (the repository
    wants a Python this host lacks) is recorded in the metadata as the reason, so validation
    reports "environment cannot be built", not "tests don't fail".
    """
    meta_path = task_dir / "metadata.json"
    meta = json.loads(meta_path.read_text())
    try:
        detected = detect_environment(task_dir / "repo_snapshot", pytest, variables)
    except EnvBuildError as exc:
        meta["environment_error"] = str(exc)
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
        return None
    if detected.spec is None:
        return None
    meta["environment"] = detected.spec.to_json()
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return prepare_environment(detected.spec, repo)


def environments_of(tasks: list[Task]) -> list[TaskEnvironment]:
    """The recorded environments the given tasks name, for a suite's page."""
    hashes = set()
    for task in tasks:
        data = (task.metadata or {}).get("environment")
        if data:
            try:
                hashes.add(EnvSpec.from_json(data).spec_hash())
            except EnvBuildError:
                continue
    return list(TaskEnvironment.objects.filter(spec_hash__in=hashes).order_by("-updated_at"))
