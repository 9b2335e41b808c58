"""One model of a diff, and the only code that reads or writes diff text.

Plain Python: imports nothing from Django or any other Crucible package (it is the
lowest layer), so builders, scoring, policies, pages and a remote worker share it.
"""

from __future__ import annotations

from patches.analysis import changed_functions, touched_base_lines, touched_paths
from patches.build import split_lines, text_hunks, text_patch, tree_patches
from patches.display import SideBySideFile, side_by_side, snippet_diff, unified_rows
from patches.model import BinaryHunk, FilePatch, FileStatus, Hunk, Line, LineKind, PatchError
from patches.parse import parse
from patches.paths import is_test_path
from patches.render import render

__all__ = [
    "BinaryHunk",
    "FilePatch",
    "FileStatus",
    "Hunk",
    "Line",
    "LineKind",
    "PatchError",
    "SideBySideFile",
    "changed_functions",
    "is_test_path",
    "parse",
    "render",
    "side_by_side",
    "snippet_diff",
    "split_lines",
    "text_hunks",
    "text_patch",
    "touched_base_lines",
    "touched_paths",
    "tree_patches",
    "unified_rows",
]
