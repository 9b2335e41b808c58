"""Reading and checking a task directory (docs/formats.md "Task format"), without writing."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.vocabulary import TaskSource, values
from sandbox.environments import EnvBuildError
from sandbox.node_versions import choice_from_metadata
from tasks.lang_tests import PYTHON, go_toolchain_of, language_of
from tasks.script_verifier import ScriptVerifierError
from tasks.spec import environment_spec, verifier_spec
from tasks.storage import hash_tree
from tasks.trees import TreeError, check_tree, exists_at, open_dir, open_regular

TASK_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
MAX_STATEMENT_BYTES = 1 << 20
MAX_PATCH_BYTES = 16 << 20

# metadata.json field -> (expected type, default). Unknown keys are kept verbatim.
_STR_FIELDS = ("repo", "base_commit", "license", "test_command", "tests_dest", "difficulty")
_LIST_FIELDS = ("fail_to_pass", "pass_to_pass", "visible_tests", "tags")
_INT_FIELDS = ("timeout_seconds", "max_steps")


class TaskDirError(ValueError):
    """A task directory that cannot be imported; the message names the directory."""


@dataclass
class TaskDir:
    path: Path
    task_id: str
    statement: str
    metadata: dict[str, Any]
    expected_patch: str
    snapshot_dir: Path
    tests_dir: Path
    snapshot_hash: str = ""
    tests_hash: str = ""
    snapshot_files: list[list[object]] = field(default_factory=list)
    tests_files: list[list[object]] = field(default_factory=list)

    @property
    def version(self) -> str:
        return task_version(self.statement, self.metadata, self.expected_patch, self.snapshot_hash, self.tests_hash)

    def model_fields(self) -> dict[str, Any]:
        meta = self.metadata
        fields: dict[str, Any] = {
            "statement": self.statement,
            "source": meta.get("source", TaskSource.HANDWRITTEN),
            "metadata": meta,
            "expected_patch": self.expected_patch,
            "snapshot_hash": self.snapshot_hash,
            "tests_hash": self.tests_hash,
            "snapshot_files": self.snapshot_files,
            "tests_files": self.tests_files,
            "version": self.version,
        }
        for name in (*_STR_FIELDS, *_LIST_FIELDS, *_INT_FIELDS):
            if name in meta:
                fields[name] = meta[name]
        return fields


def task_version(statement: str, metadata: dict[str, Any], patch: str, snapshot_hash: str, tests_hash: str) -> str:
    canonical = json.dumps(
        {
            "statement": statement,
            "metadata": metadata,
            "expected_patch": patch,
            "snapshot": snapshot_hash,
            "tests": tests_hash,
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def is_task_dir(path: Path) -> bool:
    return os.path.lexists(path / "task.md") or os.path.lexists(path / "metadata.json")


def argument_path(path: Path) -> Path:
    """The operator's own path argument, with a link there followed once.

    The operator chose that path; everything inside it is content, where a link is refused.
    """
    return path.resolve() if path.is_symlink() else path


def find_task_dirs(path: Path) -> list[Path]:
    path = argument_path(path)
    if not path.exists():
        raise TaskDirError(f"{path}: no such file or directory")
    if not path.is_dir():
        raise TaskDirError(f"{path}: not a task directory or a folder of task directories")
    if is_task_dir(path):
        return [path]
    # Plain files beside the task dirs (a README) are not tasks; links and special files are
    # kept so that reading them refuses them by name rather than skipping them silently.
    found = sorted(p for p in path.iterdir() if not p.name.startswith(".") and not stat.S_ISREG(p.lstat().st_mode))
    if not found:
        raise TaskDirError(f"{path}: holds no task directories")
    return found


def _read_text(dir_fd: int, name: str, limit: int, what: str, where: Path) -> str:
    try:
        fd, info = open_regular(name, dir_fd, name)
    except TreeError as exc:
        raise TaskDirError(f"{where}: {exc}") from None
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > limit:
            raise TaskDirError(f"{where}: {what} is larger than {limit} bytes")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise TaskDirError(f"{where}: {what} is larger than {limit} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskDirError(f"{where}: {what} is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    # Universal newlines, as text-mode reading gave before: the same file keeps the same version.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def check_metadata(meta: Any, where: Path) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise TaskDirError(f"{where}: metadata.json must hold a JSON object")
    task_id = meta.get("task_id")
    if not isinstance(task_id, str) or not TASK_ID_RE.match(task_id):
        raise TaskDirError(
            f"{where}: metadata.json task_id must be a string of letters, digits, '_', '.', '-' (got {task_id!r})"
        )
    if "source" in meta and meta["source"] not in values(TaskSource):
        raise TaskDirError(f"{where}: metadata.json source {meta['source']!r} is not one of {', '.join(TaskSource)}")
    for name in _STR_FIELDS:
        if name in meta and not isinstance(meta[name], str):
            raise TaskDirError(f"{where}: metadata.json {name} must be a string")
    for name in _LIST_FIELDS:
        if name in meta and not (isinstance(meta[name], list) and all(isinstance(x, str) for x in meta[name])):
            raise TaskDirError(f"{where}: metadata.json {name} must be a list of strings")
    for name in _INT_FIELDS:
        value = meta.get(name)
        if name in meta and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise TaskDirError(f"{where}: metadata.json {name} must be a positive integer")
    dest = meta.get("tests_dest", "tests")
    if dest.startswith("/") or ".." in Path(dest).parts or not dest.strip():
        raise TaskDirError(f"{where}: metadata.json tests_dest must be a relative path inside the repository")
    try:
        # What a build would install on the host: refused here, at import, not at the first run.
        environment_spec(meta)
    except EnvBuildError as exc:
        raise TaskDirError(f"{where}: metadata.json {exc}") from None
    try:
        verifier_spec(meta)
    except ScriptVerifierError as exc:
        raise TaskDirError(f"{where}: metadata.json {exc}") from None
    try:
        language = language_of(meta)
        go_toolchain_of(meta)
        choice_from_metadata(meta)
    except ValueError as exc:
        raise TaskDirError(f"{where}: metadata.json {exc}") from None
    if language != PYTHON and ("environment" in meta or "verifier" in meta):
        raise TaskDirError(f"{where}: metadata.json a {language} task names no Python environment and no verifier")
    return meta


def read_task_dir(path: Path) -> TaskDir:
    """Parse and check one task directory; hashes its trees but writes nothing.

    Everything is read through one descriptor of the directory, opened without following
    a link, and a symbolic link, FIFO, device or socket anywhere inside is refused by path:
    a `task.md` linked to a host secret would otherwise become a statement shown to
    reviewers and exported, and a linked folder of tests would be skipped without a word.
    """
    try:
        dir_fd = open_dir(path)
    except TreeError as exc:
        raise TaskDirError(str(exc)) from None  # names the path: a link, a file, or nothing there
    try:
        return _read_task_dir(path, dir_fd)
    except TreeError as exc:
        raise TaskDirError(f"{path}: {exc}") from None
    finally:
        os.close(dir_fd)


def _read_task_dir(path: Path, dir_fd: int) -> TaskDir:
    check_tree(Path("."), dir_fd)
    if not exists_at(dir_fd, "task.md"):
        raise TaskDirError(f"{path}: task.md is missing")
    if not exists_at(dir_fd, "metadata.json"):
        raise TaskDirError(f"{path}: metadata.json is missing")
    try:
        raw_meta = json.loads(_read_text(dir_fd, "metadata.json", 1 << 20, "metadata.json", path))
    except json.JSONDecodeError as exc:
        raise TaskDirError(f"{path}: metadata.json is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    meta = check_metadata(raw_meta, path)
    statement = _read_text(dir_fd, "task.md", MAX_STATEMENT_BYTES, "task.md", path)
    if not statement.strip():
        raise TaskDirError(f"{path}: task.md is empty")
    for name in ("repo_snapshot", "tests"):
        if not exists_at(dir_fd, name):
            raise TaskDirError(f"{path}: {name}/ is missing")
        if not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise TaskDirError(f"{path}: {name} must be a folder")
    patch = ""
    if exists_at(dir_fd, "expected_patch"):
        patch = _read_text(dir_fd, "expected_patch", MAX_PATCH_BYTES, "expected_patch", path)
    task = TaskDir(path, meta["task_id"], statement, meta, patch, path / "repo_snapshot", path / "tests")
    task.snapshot_hash, task.snapshot_files = hash_tree(Path("repo_snapshot"), dir_fd)
    task.tests_hash, task.tests_files = hash_tree(Path("tests"), dir_fd)
    if not task.tests_files:
        raise TaskDirError(f"{path}: tests/ holds no hidden tests")
    return task
