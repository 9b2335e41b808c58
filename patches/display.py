"""Rows for showing diffs on the review pages: unified (one column) and side by side.

Plain data: the template escapes every line, because patches come from agents.
"""

from __future__ import annotations

import logging
from typing import TypedDict

from patches.build import text_hunks
from patches.model import FilePatch, LineKind, PatchError
from patches.parse import parse
from patches.render import render

logger = logging.getLogger(__name__)

META_PREFIXES = ("diff --git", "index ", "--- ", "+++ ", "new file", "deleted file")

Row = tuple[str, str, str, str]  # left text, left css class, right text, right css class


class SideBySideFile(TypedDict):
    name: str
    rows: list[Row]


def unified_rows(text: str) -> list[tuple[str, str]]:
    """(css class, line) for each line of a diff as written, junk included: the page shows the text itself."""
    rows: list[tuple[str, str]] = []
    for line in (text or "").splitlines():
        if line.startswith(META_PREFIXES):
            css = "diff-meta"
        elif line.startswith("@@"):
            css = "diff-hunk"
        elif line.startswith("+"):
            css = "diff-add"
        elif line.startswith("-"):
            css = "diff-del"
        else:
            css = "diff-ctx"
        rows.append((css, line))
    return rows


def side_by_side(text: str) -> list[SideBySideFile]:
    """Per file, rows for a two-column diff: removed lines on the left beside the lines that replace them."""
    try:
        # Agents' patches are applied with --recount, so they are read that way here too.
        patches = parse(text or "", recount=True)
    except PatchError as exc:
        # The unified view still shows the text; two columns need a diff that can be read.
        logger.info("no side-by-side view for an unreadable diff: %s", exc)
        return []
    return [SideBySideFile(name=_name(patch), rows=_rows(patch)) for patch in patches]


def _name(patch: FilePatch) -> str:
    return patch.old_label if not patch.git and patch.old_label is not None else patch.path


def _rows(patch: FilePatch) -> list[Row]:
    rows: list[Row] = []
    if patch.old_mode and patch.new_mode and patch.old_mode != patch.new_mode:
        rows.append((f"mode {patch.old_mode}", "diff-meta", f"mode {patch.new_mode}", "diff-meta"))
    if patch.binary:
        rows.append(("binary file", "diff-meta", "binary file", "diff-meta"))
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            left = removed[i] if i < len(removed) else ""
            right = added[i] if i < len(added) else ""
            rows.append((left, "diff-del" if i < len(removed) else "", right, "diff-add" if i < len(added) else ""))
        removed.clear()
        added.clear()

    for hunk in patch.hunks:
        rows.append((hunk.header, "diff-hunk", hunk.header, "diff-hunk"))
        for line in hunk.lines:
            if line.kind is LineKind.REMOVED:
                removed.append(line.text)
            elif line.kind is LineKind.ADDED:
                added.append(line.text)
            else:
                flush()
                rows.append((line.text, "diff-ctx", line.text, "diff-ctx"))
        flush()
    return rows


def snippet_diff(path: str, before: str, after: str) -> str:
    """An edit action's old and new text as a unified diff, labelled a/path and b/path ("" when equal)."""
    hunks = text_hunks(before, after)
    if not hunks:
        return ""
    for hunk in hunks:
        # An edit's text is a fragment of a file: a missing final newline there says nothing about the file.
        hunk.lines = [line for line in hunk.lines if line.kind is not LineKind.NO_NEWLINE]
    return render(FilePatch(path, path, hunks=hunks, git=False, old_label=f"a/{path}", new_label=f"b/{path}"))
