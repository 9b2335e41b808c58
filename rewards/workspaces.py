"""The three workspaces of a verdict, made alike: the patch applied once and mirrored, the tests
folder copied the same way into each, every file's time levelled, and what the run must leave alone.

A process in one run must not be able to tell which run it is in (rewards.scoring): any difference
between the workspaces other than the changed expected values would be a signal to an oracle.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from sandbox import Sandbox
from tasks.spec import TaskSpec, copy_hidden_tests

LEVEL_NS = 946_684_800 * 10**9  # 2000-01-01: every file of every run's workspace, whatever was written when


def same_tests(box: Sandbox, other: Sandbox, task: TaskSpec) -> None:
    """The tests folder as planted, copied the same way into both workspaces (the same files, made in
    the same order): the second run differs from the first only by the values changed in it."""
    root = PurePosixPath(task.tests_dest).parts[0] if task.tests_dest.strip("/") else ""
    if not root or root in (".", ".."):
        copy_hidden_tests(other, task)
        for rel in _planted_files(box, task):
            _copy_file(box.workspace, other.workspace, rel)
        return
    with tempfile.TemporaryDirectory(prefix="crucible-tests-") as scratch:
        prepared = Path(scratch) / root
        shutil.copytree(box.workspace / root, prepared, symlinks=True)
        for target in (box, other):
            shutil.rmtree(target.workspace / root, ignore_errors=True)
            _copy_sorted(prepared, target.workspace / root)


def _planted_files(box: Sandbox, task: TaskSpec) -> list[str]:
    return sorted(p.relative_to(box.workspace).as_posix() for p in (box.workspace / task.tests_dest).rglob("*"))


def _copy_sorted(source: Path, dest: Path) -> None:
    dest.mkdir()
    for entry in sorted(source.iterdir(), key=lambda p: p.name):
        target = dest / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            _copy_sorted(entry, target)
        else:
            shutil.copy2(entry, target)


def mirror(source: Path, target: Path, paths: list[str]) -> bool:
    """Make each of `paths` in `target` what it is in `source` (a file with its mode, a link, or
    absent). False, with nothing promised, where a path would be written through a link or leave
    the tree: the caller applies the patch there instead."""
    root, source_root = target.resolve(), source.resolve()
    for rel in paths:  # every path checked before any is written: a refusal leaves `target` as it was
        src, dst = source / rel, target / rel
        if not dst.parent.resolve().is_relative_to(root) or not src.parent.resolve().is_relative_to(source_root):
            return False
        if dst.exists() and not dst.is_symlink() and not dst.is_file():
            return False  # a folder where the patch names a file
    for rel in paths:
        src, dst = source / rel, target / rel
        if dst.is_symlink() or dst.is_file():
            dst.unlink()
        if src.is_symlink():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        else:
            _prune_empty(dst.parent, root)  # git apply removes a folder it emptied
    return True


def _prune_empty(folder: Path, root: Path) -> None:
    while folder.resolve() != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def level(workspace: Path) -> None:
    """One time for every file and folder, set in one order: the files the second run's changes were
    written to, the patched ones, the planted ones read as old as the rest."""
    paths = sorted(workspace.rglob("*"), key=lambda p: p.as_posix())
    for path in [*paths, workspace]:
        try:
            os.utime(path, ns=(LEVEL_NS, LEVEL_NS), follow_symlinks=False)
        except OSError:
            continue


def copy_out(workspace: Path, paths: list[str]) -> tempfile.TemporaryDirectory[str]:
    """The changed files as they are now, regular files only (a link or a FIFO is not followed)."""
    scratch = tempfile.TemporaryDirectory(prefix="crucible-scan-")
    for rel in paths:
        source = workspace / rel
        if source.is_file() and not source.is_symlink():
            _copy_file(workspace, Path(scratch.name), rel)
    return scratch


def _copy_file(source: Path, dest: Path, rel: str) -> None:
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((source / rel).read_bytes())


def test_files(workspace: Path, task: TaskSpec) -> dict[str, str]:
    """The hidden tests as planted (with the probes among them), by path: what the run must leave alone."""
    root = workspace / task.tests_dest
    found = {}
    for path in root.rglob("*.py") if root.is_dir() else []:
        if path.is_file() and not path.is_symlink():
            found[path.relative_to(workspace).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def touched_files(workspace: Path, before: dict[str, str]) -> list[str]:
    """Which of `before`'s files are gone, replaced by a link, or changed."""
    touched = []
    for rel, digest in before.items():
        path = workspace / rel
        try:
            same = path.is_file() and not path.is_symlink() and hashlib.sha256(path.read_bytes()).hexdigest() == digest
        except OSError:
            same = False
        if not same:
            touched.append(rel)
    return touched
