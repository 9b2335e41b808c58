"""One model of a diff: a file patch per file, made of hunks made of lines.

Line numbers and counts are kept as a hunk header prints them, so a parsed patch renders
back to the same text. Paths never carry the `a/` / `b/` prefixes; a side that does not
exist (a new file's old side, a deleted file's new side) is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

SYMLINK_MODE = "120000"
NO_NEWLINE = " No newline at end of file"


# The largest file a GIT binary patch may carry once inflated; checked before inflating.
MAX_BINARY_BYTES = 64 * 1024 * 1024


class PatchError(ValueError):
    """Text that is not a diff we can read, or a diff that cannot be built."""


class FileStatus(StrEnum):
    ADDED = "added"
    DELETED = "deleted"
    MODIFIED = "modified"
    RENAMED = "renamed"
    COPIED = "copied"


class LineKind(StrEnum):
    CONTEXT = " "
    ADDED = "+"
    REMOVED = "-"
    # "\ No newline at end of file": says the line before it has no newline.
    NO_NEWLINE = "\\"


@dataclass(frozen=True)
class Line:
    kind: LineKind
    text: str  # without the kind character and without the newline


@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    section: str = ""  # what git prints after the second "@@" (the enclosing function)
    lines: list[Line] = field(default_factory=list)

    @property
    def header(self) -> str:
        old = f"{self.old_start}" if self.old_len == 1 else f"{self.old_start},{self.old_len}"
        new = f"{self.new_start}" if self.new_len == 1 else f"{self.new_start},{self.new_len}"
        return f"@@ -{old} +{new} @@" + (f" {self.section}" if self.section else "")

    def before(self) -> str:
        """The text this hunk expects (context and removed lines)."""
        return self._side(LineKind.REMOVED)

    def after(self) -> str:
        """The text this hunk leaves (context and added lines)."""
        return self._side(LineKind.ADDED)

    def _side(self, changed: LineKind) -> str:
        out: list[str] = []
        last: LineKind | None = None
        for line in self.lines:
            if line.kind is LineKind.NO_NEWLINE:
                if last in (LineKind.CONTEXT, changed) and out:
                    out[-1] = out[-1][:-1]
                continue
            last = line.kind
            if line.kind in (LineKind.CONTEXT, changed):
                out.append(line.text + "\n")
        return "".join(out)


@dataclass(frozen=True)
class BinaryHunk:
    """One half of a "GIT binary patch": the new content (or a delta to it), zlib + base85."""

    method: str  # literal | delta
    size: int  # bytes once inflated
    data: tuple[str, ...]  # the encoded lines, each starting with its length character


@dataclass
class FilePatch:
    old_path: str | None
    new_path: str | None
    status: FileStatus = FileStatus.MODIFIED
    hunks: list[Hunk] = field(default_factory=list)
    old_mode: str | None = None
    new_mode: str | None = None
    old_hash: str | None = None  # from the "index" line
    new_hash: str | None = None
    similarity: int | None = None  # percent, for renames and copies
    dissimilarity: int | None = None  # percent, for rewrites (git diff -B)
    binary: bool = False
    # Forward then reverse data of a "GIT binary patch"; empty for "Binary files ... differ".
    binary_hunks: list[BinaryHunk] = field(default_factory=list)
    git: bool = True  # has a "diff --git" header; False for a plain ---/+++ unified diff
    # A plain diff's ---/+++ names as written (they may carry a timestamp after a tab).
    old_label: str | None = None
    new_label: str | None = None
    text: str = ""  # the text this patch was parsed from (or rendered to, when built)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the patch touches: both sides of a rename or copy."""
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))

    @property
    def symlink(self) -> bool:
        return SYMLINK_MODE in (self.old_mode, self.new_mode)

    def added_lines(self) -> list[tuple[int, str]]:
        """(line number in the new file, text) of each added line."""
        out: list[tuple[int, str]] = []
        for hunk in self.hunks:
            number = hunk.new_start
            for line in hunk.lines:
                if line.kind is LineKind.ADDED:
                    out.append((number, line.text))
                if line.kind in (LineKind.ADDED, LineKind.CONTEXT):
                    number += 1
        return out

    def removed_lines(self) -> list[tuple[int, str]]:
        """(line number in the old file, text) of each removed line."""
        out: list[tuple[int, str]] = []
        for hunk in self.hunks:
            number = hunk.old_start
            for line in hunk.lines:
                if line.kind is LineKind.REMOVED:
                    out.append((number, line.text))
                if line.kind in (LineKind.REMOVED, LineKind.CONTEXT):
                    number += 1
        return out
