"""What a patch changes: the paths, the base lines and the Python functions it touches."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from patches import pysource
from patches.model import FilePatch, LineKind
from patches.parse import parse

Function = ast.FunctionDef | ast.AsyncFunctionDef


def touched_paths(patches: Iterable[FilePatch]) -> list[str]:
    """Every path the patches touch, in order, each once (both sides of a rename)."""
    return list(dict.fromkeys(path for patch in patches for path in patch.paths))


def touched_base_lines(patch: FilePatch) -> set[int]:
    """Base line numbers a patch removes, or inserts after: context lines do not count."""
    touched: set[int] = set()
    for hunk in patch.hunks:
        old = hunk.old_start
        for line in hunk.lines:
            if line.kind is LineKind.REMOVED:
                touched.add(old)
                old += 1
            elif line.kind is LineKind.ADDED:
                touched.add(max(old - 1, 1))
            elif line.kind is LineKind.CONTEXT:
                old += 1
    return touched


def changed_functions(base: Path, patch: str | Iterable[FilePatch]) -> dict[str, list[Function]]:
    """Functions in the base whose lines the patch touches, per Python file; outermost functions only.

    Raises PatchError for an unreadable diff and SyntaxError for a base file Python cannot parse.
    """
    file_patches = parse(patch, recount=True) if isinstance(patch, str) else patch
    found: dict[str, list[Function]] = {}
    for file_patch in file_patches:
        path = file_patch.old_path
        if not path or not path.endswith(".py") or _escapes(path) or not (base / path).is_file():
            continue
        touched = touched_base_lines(file_patch)
        tree = pysource.parse((base / path).read_text())
        funcs = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and touched & set(range(n.lineno, (n.end_lineno or n.lineno) + 1))
        ]
        # Outermost only: replacing an outer function's body removes any nested one too.
        found[path] = [f for f in funcs if not any(o is not f and f in ast.walk(o) for o in funcs)]
    return found


def _escapes(path: str) -> bool:
    pure = PurePosixPath(path)
    return pure.is_absolute() or ".." in pure.parts
