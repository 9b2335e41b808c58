"""Building diffs: from the before and after text of one file, or from two directory trees."""

from __future__ import annotations

import difflib
import os
import subprocess
from pathlib import Path

from patches.model import NO_NEWLINE, FilePatch, FileStatus, Hunk, Line, LineKind, PatchError
from patches.parse import parse
from patches.paths import strip_prefix
from patches.render import render

REGULAR_MODE = "100644"
# git that reads no configuration but ours: a tree we diff may come from an agent.
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "LANG": "C.UTF-8",
    "HOME": "/nonexistent",
}
GIT_CONFIG = (
    "core.quotePath=false",
    "diff.noprefix=false",
    "diff.renames=false",
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
)


def split_lines(text: str) -> list[str]:
    """Lines with their newlines, split at "\\n" only (str.splitlines also splits at form feeds)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def text_hunks(before: str, after: str, context: int = 3) -> list[Hunk]:
    """difflib's hunks between two texts, with a marker after a last line that has no newline."""
    old, new = split_lines(before), split_lines(after)
    hunks = []
    for group in difflib.SequenceMatcher(None, old, new).get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        old_len, new_len = last[2] - first[1], last[4] - first[3]
        # A hunk that holds no line of a side names the line before it (0 at the top), as `diff -u` does.
        hunk = Hunk(first[1] + (old_len > 0), old_len, first[3] + (new_len > 0), new_len)
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                _add(hunk, LineKind.CONTEXT, old[i1:i2])
                continue
            _add(hunk, LineKind.REMOVED, old[i1:i2])
            _add(hunk, LineKind.ADDED, new[j1:j2])
        hunks.append(hunk)
    return hunks


def _add(hunk: Hunk, kind: LineKind, lines: list[str]) -> None:
    for line in lines:
        hunk.lines.append(Line(kind, line.removesuffix("\n")))
        if not line.endswith("\n"):
            hunk.lines.append(Line(LineKind.NO_NEWLINE, NO_NEWLINE))


def text_patch(path: str, before: str | None, after: str | None, mode: str = REGULAR_MODE) -> FilePatch | None:
    """A git-style patch taking one file from `before` to `after` (None: the file does not exist); None if equal."""
    if before == after or (before is None and after is None):
        return None
    status = FileStatus.ADDED if before is None else FileStatus.DELETED if after is None else FileStatus.MODIFIED
    patch = FilePatch(
        None if before is None else path,
        None if after is None else path,
        status,
        text_hunks(before or "", after or ""),
        old_mode=mode if before is not None and status is FileStatus.DELETED else None,
        new_mode=mode if after is not None and status is FileStatus.ADDED else None,
    )
    patch.text = render(patch)
    return patch


def tree_patches(before: Path, after: Path) -> list[FilePatch]:
    """What `git diff --no-index` says takes the `before` directory to `after`: text, binary, modes and symlinks.

    Paths come out relative to the two roots; renames are not detected.
    """
    old_root, new_root = before.resolve(), after.resolve()
    for root in (old_root, new_root):
        if not root.is_dir():
            raise PatchError(f"{root} is not a directory")
    done = subprocess.run(
        [
            "git",
            *(arg for item in GIT_CONFIG for arg in ("-c", item)),
            "diff",
            "--no-index",
            "--binary",
            "--full-index",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--",
            str(old_root),
            str(new_root),
        ],
        cwd="/",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **GIT_ENV},
        capture_output=True,
        timeout=300,
    )
    # --no-index exits 1 when the trees differ, like diff(1).
    if done.returncode not in (0, 1):
        raise PatchError(f"git diff --no-index failed: {done.stderr.decode('utf-8', 'replace').strip()[:500]}")
    patches = parse(done.stdout.decode("utf-8", "surrogateescape"))
    # git names each side by the path it was given, without the leading slash.
    old_prefix, new_prefix = str(old_root).lstrip("/") + "/", str(new_root).lstrip("/") + "/"
    for patch in patches:
        if patch.old_path is not None:
            patch.old_path = strip_prefix(patch.old_path, old_prefix)
        if patch.new_path is not None:
            patch.new_path = strip_prefix(patch.new_path, new_prefix)
        patch.text = render(patch)
    return patches
