"""Parsing Python source safely from many threads at once.

CPython 3.11 keeps the AST constructor's recursion counter in per-interpreter state
(python/cpython#106905): when two threads turn parse trees into `ast` objects at the same time
(a garbage collection during one build can run Python code, which lets another thread in), the
first one fails with "SystemError: AST constructor recursion depth mismatch". Bulk scoring
parses from a thread pool, so every parse in the project goes through one lock. It is
re-entrant because a finalizer that runs mid-parse on the same thread may parse too.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.Module:
    """`ast.parse`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename, mode)  # type: ignore[return-value]


def literal_eval(text: str) -> object:
    """`ast.literal_eval` of source text (it parses, so it takes the same lock)."""
    with _LOCK:
        tree = ast.parse(text.strip(), mode="eval")
    return ast.literal_eval(tree)
