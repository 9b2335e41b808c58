"""Parsing from many threads: one lock in patches.pysource, and no parse that goes around it.

CPython 3.11's AST constructor keeps its recursion counter per interpreter, so two threads that
build `ast` objects at once can fail with "SystemError: AST constructor recursion depth mismatch"
(seen in bulk scoring, whose thread pool plants probes and scans patches in parallel).
"""

from __future__ import annotations

import ast
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from patches import pysource

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = (".venv", "var", "tests", "node_modules")


def test_parses_are_serialised_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    inside = 0
    most = 0
    guard = threading.Lock()

    def slow_parse(source, filename, mode):  # stands in for ast.parse; records how many run at once
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.01)  # releases the GIL, as a collection during a real build can
        with guard:
            inside -= 1
        return ast.Module(body=[], type_ignores=[])

    monkeypatch.setattr(pysource, "ast", SimpleNamespace(parse=slow_parse, literal_eval=ast.literal_eval))
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda i: pysource.parse(f"x = {i}"), range(40)))
    assert most == 1


def test_parse_and_literal_eval_behave_like_the_standard_library() -> None:
    assert ast.dump(pysource.parse("x = 1", "f.py")) == ast.dump(ast.parse("x = 1", "f.py"))
    with pytest.raises(SyntaxError) as raised:
        pysource.parse("def (:", "broken.py")
    assert raised.value.filename == "broken.py"
    assert pysource.literal_eval(" {'a': True, 'b': None} ") == {"a": True, "b": None}
    with pytest.raises(ValueError):
        pysource.literal_eval("__import__('os')")


def test_the_parse_is_reentrant_on_one_thread() -> None:
    # A finalizer run by a collection mid-parse may parse again on the same thread.
    with pysource._LOCK:
        assert isinstance(pysource.parse("y = 2"), ast.Module)


def _unlocked_parses(path: Path) -> list[str]:
    tree = ast.parse(path.read_bytes(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ast":
            if node.attr in {"parse", "PyCF_ONLY_AST"}:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} ast.{node.attr}")
    return found


def test_no_project_module_parses_around_the_lock() -> None:
    found = []
    # Only the project's own folders are walked: .venv is huge, and another test process's
    # .hypothesis/ or var/ temporaries can vanish mid-walk.
    tops = [p for p in ROOT.iterdir() if p.name not in SKIPPED and not p.name.startswith(".")]
    paths = [p for top in tops for p in ([top] if top.is_file() else top.rglob("*.py")) if p.suffix == ".py"]
    for path in sorted(paths):
        rel = path.relative_to(ROOT)
        if "repo_snapshot" in rel.parts or rel == Path("patches/pysource.py"):
            continue
        found += _unlocked_parses(path)
    assert not found, "parse through patches.pysource:\n" + "\n".join(found)
