"""The agent's file tools over a workspace: read, write, edit, search, search_symbol (any language).

They run on the host, over a directory untrusted code has written to, so every path
goes through paths.resolve and nothing follows a link out of the workspace.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from sandbox import symbols
from sandbox.paths import ToolError, resolve

MAX_READ_BYTES = 256 * 1024
MAX_SEARCH_FILE_BYTES = 1024 * 1024
SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules", ".venv"})


def read_file(workspace: Path, rel: str, max_bytes: int = MAX_READ_BYTES) -> tuple[str, bool]:
    """(text, truncated)."""
    path = resolve(workspace, rel, must_exist=True)
    if path.is_dir():
        raise ToolError(f"{rel}: is a directory")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(max_bytes + 1)
    return data[:max_bytes].decode("utf-8", "replace"), len(data) > max_bytes


def write_file(workspace: Path, rel: str, content: str) -> int:
    """Write the whole file or nothing: a full workspace leaves the old content and says so."""
    path = resolve(workspace, rel)
    if path.is_dir():
        raise ToolError(f"{rel}: is a directory")
    data = content.encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode) if path.is_file() else 0o644
        except FileNotFoundError:
            mode = 0o644
        # A fresh neighbour (O_EXCL: never a link planted there) renamed over the file: the
        # rename replaces a link swapped in after resolve() rather than following it.
        tmp = path.with_name(f".{path.name}.crucible-{secrets.token_hex(6)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, mode)  # the umask may have taken bits the file had
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise ToolError(f"{rel}: not written, the workspace is full ({exc.strerror})") from None
        raise ToolError(f"{rel}: not written ({exc.strerror})") from None
    return len(data)


def edit_file(workspace: Path, rel: str, old: str, new: str) -> str:
    """Replace `old` by `new`; `old` must occur exactly once, so the edit is unambiguous."""
    if not old:
        raise ToolError("the text to replace is empty")
    text, truncated = read_file(workspace, rel, max_bytes=16 * 1024 * 1024)
    if truncated:
        raise ToolError(f"{rel}: too large to edit")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"{rel}: the text to replace was not found (it must match exactly, whitespace included)")
    if count > 1:
        raise ToolError(f"{rel}: the text to replace occurs {count} times; include more context so it is unique")
    write_file(workspace, rel, text.replace(old, new, 1))
    line = text[: text.index(old)].count("\n") + 1
    return f"{rel}: replaced 1 occurrence at line {line}"


@dataclass(frozen=True)
class Match:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def _walk_files(root: Path, start: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if not path.is_symlink():
                found.append(path)
    return found


def search(workspace: Path, pattern: str, rel: str = ".", regex: bool = False, max_results: int = 200) -> list[Match]:
    """Text search over the workspace's files (literal by default), bounded in results."""
    if not pattern:
        raise ToolError("search pattern is empty")
    try:
        compiled = re.compile(pattern if regex else re.escape(pattern))
    except re.error as exc:
        raise ToolError(f"bad regular expression: {exc}") from None
    root = workspace.resolve()
    start = resolve(workspace, rel, must_exist=True)
    files = [start] if start.is_file() else _walk_files(root, start)
    matches: list[Match] = []
    for path in files:
        data = _read_regular(path, MAX_SEARCH_FILE_BYTES)
        if data is None:
            continue  # not a regular file, too large, or removed by the command: nothing to match in it
        if b"\x00" in data[:8192]:
            continue  # binary
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if compiled.search(line):
                matches.append(Match(path.relative_to(root).as_posix(), number, line.strip()[:300]))
                if len(matches) >= max_results:
                    return matches
    return matches


def search_symbol(workspace: Path, name: str, max_results: int = 100) -> list[Match]:
    """Definitions named `name` (or `Owner.name`) in the workspace's Python, Go and JavaScript/TypeScript
    sources (sandbox.symbols): functions, classes and methods; Go types, constants and variables;
    JavaScript's declared names, TypeScript's interfaces and types."""
    try:
        name = symbols.check_symbol(name)
    except symbols.SymbolError as exc:
        raise ToolError(str(exc)) from None
    root = workspace.resolve()
    matches: list[Match] = []
    for path in _walk_files(root, root):
        if path.suffix not in symbols.SOURCE_SUFFIXES:
            continue
        data = _read_regular(path, MAX_SEARCH_FILE_BYTES)
        if data is None:
            continue
        for found in symbols.definitions(path.suffix, data, name):
            matches.append(Match(path.relative_to(root).as_posix(), found.line, str(found)))
            if len(matches) >= max_results:
                return matches
    return matches


def _read_regular(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes, or None for anything else (a link, a FIFO a command left, a device),
    one over `limit` bytes, or one gone meanwhile. O_NONBLOCK: opening a FIFO never waits for a writer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = fh.read(limit + 1)
    return data if len(data) <= limit else None
