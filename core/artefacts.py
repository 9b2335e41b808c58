"""Artefacts shared between hosts through the object store: the steps every kind takes alike.

Task trees (tasks.tree_cache), built environments (tasks.environments) and checkpoints
(training.checkpoint_store) are published by content hash and fetched, verified, into a
local cache on the host that needs them. Their layouts differ (one tar, one gzip tar, a
manifest of blobs); what they share lives here, once:

- `staged`: a fetch fills a private folder beside its destination and renames it into place
  in one step, so no reader ever sees half an artefact under its name. Two processes fetching
  the same artefact both stage; one rename wins and the other uses the winner's copy (the
  content is verified before the rename, so either copy is the same).
- `checked_members`: an archive from the store is checked, not trusted: no absolute name, no
  `..`, only folders, regular files and the links the caller allows, all under one root.
- `pack`: a tar whose bytes depend only on the files (no owner, no time), so the same
  content always makes the same archive and the same hash.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path, PurePosixPath


class ArtefactError(ValueError):
    """An archive or copy that is not what it claims to be; the message names the artefact."""


def staged(
    dest: Path,
    fill: Callable[[Path], None],
    *,
    ready: Callable[[Path], bool] | None = None,
    lock: Callable[[], AbstractContextManager[object]] | None = None,
) -> bool:
    """Make `dest` by `fill(staging)`, then one rename; True when this call's copy is the one in place.

    `fill` writes the artefact at the path it is given (which does not exist yet) and raises if
    what it fetched does not verify; nothing is left behind then. When another process put
    `dest` in place first, its copy serves (`ready(dest)` says it is whole) and ours is dropped.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fetching-", dir=dest.parent))
    try:
        fill(staging / "artefact")
        try:
            with lock() if lock is not None else contextlib.nullcontext():
                os.rename(staging / "artefact", dest)
        except OSError:
            whole = ready if ready is not None else Path.exists
            if not whole(dest):
                raise
            return False
        return True
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # empty when the rename won


def drop(path: Path) -> None:
    """Remove a cached artefact: renamed away first, so a reader never sees it half deleted."""
    if not path.exists():
        return
    graveyard = Path(tempfile.mkdtemp(prefix=".evicted-", dir=path.parent))
    os.rename(path, graveyard / "artefact")
    shutil.rmtree(graveyard, ignore_errors=True)


def checked_members(
    tar: tarfile.TarFile,
    what: str,
    *,
    root: str | None = None,
    link_check: Callable[[tarfile.TarInfo], str | None] | None = None,
) -> list[tarfile.TarInfo]:
    """Every member of `tar`, refused (ArtefactError naming `what`) unless it is a folder or a
    regular file with a relative name inside the archive (under `root` when given), or a
    symbolic link when `link_check` is given: a relative one must land inside too, and
    `link_check` says why any other is refused (None: it may stay)."""
    inside = f"{root}/" if root is not None else "the archive"
    members = tar.getmembers()
    for member in members:
        name = PurePosixPath(member.name)
        if name.is_absolute() or ".." in name.parts or (root is not None and name.parts[:1] != (root,)):
            raise ArtefactError(f"{what}: the stored archive holds {member.name!r}, outside {inside}")
        if member.issym() and link_check is not None:
            if not posixpath.isabs(member.linkname):
                landing = PurePosixPath(posixpath.normpath(posixpath.join(str(name.parent), member.linkname)))
                if ".." in landing.parts or (root is not None and landing.parts[:1] != (root,)):
                    raise ArtefactError(f"{what}: the stored archive's link {member.name!r} points outside {inside}")
            problem = link_check(member)
            if problem:
                raise ArtefactError(f"{what}: the stored archive's link {member.name!r} {problem}")
        elif not (member.isfile() or member.isdir()):
            kinds = "a file, folder or link" if link_check is not None else "a file or folder"
            raise ArtefactError(f"{what}: the stored archive holds {member.name!r}, which is not {kinds}")
    return members


def pack(archive: Path, files: Iterable[tuple[str, Path]]) -> None:
    """A tar of `files` (archive name, path) that depends only on their names and bytes."""
    with tarfile.open(archive, "w") as tar:
        for arcname, path in files:
            info = tar.gettarinfo(str(path), arcname=arcname)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if info.isfile():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
