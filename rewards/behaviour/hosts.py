"""The hidden test files probes go into: reading one, finding a test in it, copying a test out of it.

A `HostFile` gathers what is planted into one hidden test file (`Insert`s) and into the new
file beside it (`NewFile`); the copying helpers here are shared by canaries and twins.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from patches import pysource
from rewards.behaviour.model import NodeRef, ProbeError


@dataclass
class Insert:
    after_line: int  # 1-based line after which the text goes (0: at the top)
    text: str
    order: int  # ties on one line keep the order they were planned in
    # On one line, methods go first (the class they belong to may end there), then module-level
    # functions, then the twin helper: anything indented after a function would become its body.
    rank: int = 1

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.after_line, self.rank, self.order)


@dataclass
class HostFile:
    """A hidden test file probes are planted into or beside."""

    rel: str
    path: Path
    text: str
    encoding: str
    tree: ast.Module
    inserts: list[Insert] = field(default_factory=list)
    module_names: set[str] = field(default_factory=set)
    new_sibling: NewFile | None = None
    helper_name: str | None = None  # the twin helper's name, shared with the new file beside it
    helper_planted: bool = False
    duplicable: bool | None = None  # whether a new file may repeat its module level (placement._duplicable)
    # Looked up once per body (the module's, a class's): finding each of N tests by scanning its
    # file would make planting quadratic in a file of generated tests.
    _defs: dict[int, _Defs] = field(default_factory=dict, repr=False)

    def defs(self, owner: ast.ClassDef | None) -> _Defs:
        key = id(owner) if owner is not None else 0
        found = self._defs.get(key)
        if found is None:
            found = self._defs[key] = _Defs.of(owner.body if owner is not None else self.tree.body)
        return found

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines(keepends=True)


@dataclass
class _Defs:
    """One body's classes and functions by name (the last definition of a name wins, as at import),
    and its `pytestmark` assignments as source."""

    classes: dict[str, ast.ClassDef]
    funcs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    marks: list[str]

    @classmethod
    def of(cls, body: list[ast.stmt]) -> _Defs:
        classes = {n.name: n for n in body if isinstance(n, ast.ClassDef)}
        funcs = {n.name: n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        return cls(classes, funcs, [ast.unparse(stmt) for stmt in body if _assigns(stmt, "pytestmark")])


@dataclass
class NewFile:
    rel: str
    host: HostFile
    module_funcs: list[str] = field(default_factory=list)
    helper_planted: bool = False


def read_host(workspace: Path, rel: str) -> HostFile:
    path = workspace / rel
    if path.is_symlink() or not path.is_file():
        raise ProbeError("its file is not a regular file in the workspace")
    raw = path.read_bytes()
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
        tree = pysource.parse(text, filename=rel)
    except (SyntaxError, UnicodeDecodeError, LookupError, ValueError, RecursionError) as exc:
        raise ProbeError(f"its file does not parse: {type(exc).__name__}") from None
    if not text.endswith("\n"):
        text += "\n"
    host = HostFile(rel, path, text, encoding, tree)
    host.module_names = bound_names(tree.body)
    return host


def bound_names(body: Iterable[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return names


def find_test(host: HostFile, ref: NodeRef) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.ClassDef | None]:
    owner: ast.ClassDef | None = None
    for class_name in ref.classes:
        found = host.defs(owner).classes.get(class_name)
        if found is None:
            raise ProbeError("its class is not defined in its file (inherited or generated)")
        owner = found
    func = host.defs(owner).funcs.get(ref.name)
    if func is None:
        raise ProbeError("its function is not defined in its file (inherited or generated)")
    if len(ref.classes) > 1:
        raise ProbeError("it is in a nested class")
    if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in own_nodes(func)):
        raise ProbeError("it is a generator")
    marks = [ast.unparse(d) for d in func.decorator_list]
    marks += [ast.unparse(d) for d in (owner.decorator_list if owner else [])]
    marks += host.defs(None).marks + (host.defs(owner).marks if owner else [])
    if any("xfail" in m for m in marks):
        raise ProbeError("it is marked xfail")
    return func, owner


def _assigns(stmt: ast.stmt, name: str) -> bool:
    return isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)


def own_nodes(func: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions or classes nested in it."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))


def copy_test(func: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef:
    clone = pysource.parse(ast.unparse(func)).body[0]
    assert isinstance(clone, ast.FunctionDef | ast.AsyncFunctionDef)
    body = clone.body
    # A docstring would be re-indented with the copy; it says nothing the probe needs.
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            body = body[1:] or [ast.Pass()]
    clone.body = body
    return clone


class OwnScope(ast.NodeTransformer):
    """Transforms a function's own statements only: a nested function, class or lambda is
    another scope (its returns and asserts are not the test's), so it is left as it is."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node


class _BeforeReturns(OwnScope):
    """Puts `tail` before every return of the function itself (so an early return still meets it)."""

    def __init__(self, tail: list[ast.stmt]) -> None:
        self.tail = tail

    def visit_Return(self, node: ast.Return) -> list[ast.stmt]:
        return [*(_fresh(s) for s in self.tail), node]


def _fresh(node: ast.stmt) -> ast.stmt:
    return pysource.parse(ast.unparse(node)).body[0]


def end_with(func: ast.FunctionDef | ast.AsyncFunctionDef, tail: list[ast.stmt]) -> None:
    transformer = _BeforeReturns(tail)
    func.body = [s for stmt in func.body for s in as_list(transformer.visit(stmt))]
    func.body += [_fresh(s) for s in tail]


def as_list(node: ast.AST | list[ast.stmt] | None) -> list[ast.stmt]:
    if node is None:
        return []
    if isinstance(node, list):
        return node
    assert isinstance(node, ast.stmt)
    return [node]
