"""Unpacking a .tar / .tar.gz / .zip of task directories, refusing anything but files and folders.

An archive is a list of names and kinds that someone else wrote. Every member is checked
before a single byte is written: an absolute name or a `..` part (zip-slip, tar-slip) would
land outside the folder it is unpacked into, and a link, hard link, device or FIFO would
make reading the task read a host file. What is written is bounded in count and size as it
is written, so an archive that lies about its sizes (a zip bomb) stops at the limit.
"""

from __future__ import annotations

import lzma
import os
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from tasks.taskdir import TaskDirError

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
MAX_MEMBERS = 100_000
MAX_UNPACKED_BYTES = 2 << 30


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


@dataclass(frozen=True)
class _Member:
    name: PurePosixPath
    is_dir: bool
    executable: bool
    size: int
    open: Callable[[], IO[bytes]]


def _checked_name(archive: Path, raw: str) -> PurePosixPath:
    if not raw or "\x00" in raw:
        raise TaskDirError(f"{archive}: a member has an empty or NUL-containing name")
    if raw.startswith("/"):
        raise TaskDirError(f"{archive}: {raw!r} is an absolute path; members must be relative")
    name = PurePosixPath(raw)
    if ".." in name.parts:
        raise TaskDirError(f"{archive}: {raw!r} has a '..' part; members must stay inside the archive's folder")
    return name  # "." (what `tar -C dir .` starts with) has no parts: the folder itself


def _tar_members(archive: Path, tar: tarfile.TarFile) -> Iterator[_Member]:
    for count, info in enumerate(tar, 1):
        if count > MAX_MEMBERS:  # before the listing itself grows without bound
            raise TaskDirError(f"{archive}: more than {MAX_MEMBERS} members")
        name = _checked_name(archive, info.name)
        if info.issym() or info.islnk():
            kind = "a symbolic link" if info.issym() else "a hard link"
            raise TaskDirError(f"{archive}: {info.name!r} is {kind}; links are not allowed in a task archive")
        if not (info.isfile() or info.isdir()):
            kind = "a FIFO" if info.isfifo() else "a device" if info.isdev() else f"of tar type {info.type!r}"
            raise TaskDirError(f"{archive}: {info.name!r} is {kind}; only files and folders are allowed")

        def opener(info: tarfile.TarInfo = info) -> IO[bytes]:
            fh = tar.extractfile(info)
            if fh is None:
                raise TaskDirError(f"{archive}: {info.name!r} cannot be read")
            return fh

        yield _Member(name, info.isdir(), bool(info.mode & stat.S_IXUSR), info.size, opener)


def _zip_members(archive: Path, zf: zipfile.ZipFile) -> Iterator[_Member]:
    for info in zf.infolist():
        name = _checked_name(archive, info.filename)
        mode = info.external_attr >> 16  # the Unix mode, when a Unix tool made the archive
        if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "a special file"
            raise TaskDirError(f"{archive}: {info.filename!r} is {kind}; only files and folders are allowed")
        if info.flag_bits & 0x1:
            raise TaskDirError(f"{archive}: {info.filename!r} is encrypted")

        def opener(info: zipfile.ZipInfo = info) -> IO[bytes]:
            return zf.open(info)

        yield _Member(name, info.is_dir(), bool(mode & stat.S_IXUSR), info.file_size, opener)


@contextmanager
def _members(archive: Path) -> Iterator[list[_Member]]:
    try:
        if archive.name.lower().endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                yield list(_zip_members(archive, zf))
        else:
            with tarfile.open(archive, "r:*") as tar:
                yield list(_tar_members(archive, tar))
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, OSError) as exc:
        raise TaskDirError(f"{archive}: cannot be unpacked ({str(exc)[:200]})") from None


def _check_all(archive: Path, members: list[_Member]) -> None:
    for member in members:
        if not member.name.parts and not member.is_dir:
            raise TaskDirError(f"{archive}: a member names no file")
    if len(members) > MAX_MEMBERS:
        raise TaskDirError(f"{archive}: more than {MAX_MEMBERS} members")
    if sum(m.size for m in members) > MAX_UNPACKED_BYTES:
        raise TaskDirError(f"{archive}: unpacks to more than {MAX_UNPACKED_BYTES} bytes")
    files: set[PurePosixPath] = set()
    dirs: set[PurePosixPath] = set()
    for member in members:
        if member.name in files or (not member.is_dir and member.name in dirs):
            raise TaskDirError(f"{archive}: {member.name.as_posix()!r} appears more than once")
        (dirs if member.is_dir else files).add(member.name)
        dirs.update(member.name.parents)
    clash = files & dirs
    if clash:
        raise TaskDirError(f"{archive}: {min(clash).as_posix()!r} is both a file and a folder")


def unpack_archive(archive: Path, dest: Path) -> None:
    """Unpack `archive` into `dest`, a fresh empty folder of ours; refuses before writing anything."""
    if not archive.is_file():
        raise TaskDirError(f"{archive}: no such file")
    with _members(archive) as members:
        _check_all(archive, members)
        budget = MAX_UNPACKED_BYTES
        for member in members:
            target = dest.joinpath(*member.name.parts)
            if member.is_dir:
                target.mkdir(parents=True, exist_ok=True)
                continue
            # Only files and folders were let through and the names are checked, so every
            # parent here is a folder we made; O_EXCL|O_NOFOLLOW all the same.
            target.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(target, flags, 0o755 if member.executable else 0o644)
            with os.fdopen(fd, "wb") as sink, member.open() as source:
                budget -= _copy_bounded(source, sink, budget, archive, member)


def _copy_bounded(source: IO[bytes], sink: IO[bytes], budget: int, archive: Path, member: _Member) -> int:
    written = 0
    while chunk := source.read(1 << 20):
        written += len(chunk)
        if written > budget or written > member.size:
            raise TaskDirError(f"{archive}: {member.name.as_posix()!r} unpacks to more than it declares")
        sink.write(chunk)
    return written


def tasks_root(unpacked: Path) -> Path:
    """Where the task dirs are: an archive of one folder (tasks/task_0001/...) is looked into."""
    entries = [p for p in unpacked.iterdir() if not p.name.startswith(".")]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        only = entries[0]
        if not (only / "task.md").exists() and not (only / "metadata.json").exists():
            return only
    return unpacked
