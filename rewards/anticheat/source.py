"""One analysed source and what its names refer to: imports, aliases, computed getattr, sys.modules.

The detectors never match a name as written: `_r.TestReport`, `getattr(m, "TestRe" + "port")` and
`sys.modules["_pytest.reports"]` all resolve here to `_pytest.reports.TestReport`.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rewards.anticheat.flags import Finding
from rewards.anticheat.patterns import BUILTIN_NAMES, IMPORTERS, MAX_SNIPPET


def snippet_of(lines: list[str], node: ast.AST) -> str:
    """The node's source text, whitespace collapsed and cut short (columns count UTF-8 bytes)."""
    first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    start, end = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if first is None or last is None or start is None or end is None or last > len(lines):
        return ""
    last = min(last, first + 20)  # enough lines for a snippet of MAX_SNIPPET characters
    chunk = [line.encode() for line in lines[first - 1 : last]]
    if len(chunk) == 1:
        chunk[0] = chunk[0][start:end]
    else:
        chunk[0] = chunk[0][start:]
        if last == node.end_lineno:  # type: ignore[attr-defined]
            chunk[-1] = chunk[-1][:end]
    text = b"\n".join(chunk).decode("utf-8", "replace")
    return " ".join(text.split())[:MAX_SNIPPET]


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


class Source:
    """One Python source (a file, or a payload it hands to exec): what its names mean, and its findings.

    The state of every later stage lives here because the pre-pass below already folds
    (a name bound by `getattr(m, "na" + "me")` is only known once the string is folded).
    """

    def __init__(
        self,
        tree: ast.Module,
        source: str,
        rel: str,
        root: Path | None,
        depth: int = 0,
        parent: Source | None = None,
        at_line: int = 0,
    ) -> None:
        self.tree = tree
        self.source = source
        self.lines = re.split(r"\r\n|\r|\n", source)
        self.rel = rel
        self.root = root
        self.depth = depth
        self.at_line = at_line
        self.findings: list[Finding] = []
        self.docstrings = _docstrings(tree)
        self.memo: dict[int, Any] = {}
        self.folding: set[str] = set()
        self.fold_steps = 0
        self.aliases: dict[str, str] = dict(parent.aliases) if parent else {}
        self.consts: dict[str, ast.expr] = dict(parent.consts) if parent else {}
        self.defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.module_bound: set[str] = set(parent.module_bound) if parent else set()
        self.classes: dict[int, ast.ClassDef] = {}  # id(function) -> the class whose body holds it
        self._prepare()

    def add(self, detector: str, why: str, node: ast.AST, value: Any = None) -> None:
        snippet = snippet_of(self.lines, node)
        if value is not None:
            shown = value if isinstance(value, str) else repr(value)
            snippet = f"{snippet} -> {shown[:MAX_SNIPPET]!r}" if shown != snippet else snippet
        if self.depth:
            why = f"{why} (in code run by exec at line {self.at_line})"
        line = self.at_line if self.depth else getattr(node, "lineno", 0)
        self.findings.append(Finding(detector, why, line, snippet))

    # -- pre-pass: what names mean ----------------------------------------------------

    def _prepare(self) -> None:
        assigned: Counter[str] = Counter()
        values: dict[str, ast.expr] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.defs.setdefault(node.name, []).append(node)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        self.classes[id(item)] = node
            for name, value in self._bindings(node):
                assigned[name] += 1
                if value is not None:
                    values[name] = value
        for node in self.tree.body:
            for name, _ in self._bindings(node):
                self.module_bound.add(name)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.module_bound.add(node.name)
        self._imports()
        self.consts.update({name: value for name, value in values.items() if assigned[name] == 1})
        # Aliases chain (`m = importlib; x = m.import_module(...)`): a few rounds reach them.
        for _ in range(3):
            for name, value in values.items():
                if name not in self.aliases:
                    resolved = self.qual(value)
                    if resolved:
                        self.aliases[name] = resolved

    @staticmethod
    def _bindings(node: ast.AST) -> Iterator[tuple[str, ast.expr | None]]:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value if len(node.targets) == 1 else None
                else:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                            yield sub.id, None
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and isinstance(node.target, ast.Name):
            yield node.target.id, node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, None
            yield node.target.id, None
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name):
                    yield item.optional_vars.id, item.context_expr
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            for sub in ast.walk(node.target):
                if isinstance(sub, ast.Name):
                    yield sub.id, None
                    yield sub.id, None

    def _imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    # -- what an expression names -----------------------------------------------------

    def qual(self, node: ast.AST) -> str | None:
        """The dotted name an expression refers to (`_r.TestReport` -> `_pytest.reports.TestReport`)."""
        try:
            return self._qual(node)
        except RecursionError:
            return None

    def _qual(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id == "__builtins__":
                return "builtins"
            if node.id in BUILTIN_NAMES and node.id not in self.module_bound:
                return f"builtins.{node.id}"
            return None
        if isinstance(node, ast.Attribute):
            base = self._qual(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self._qual(node.func)
            if func == "builtins.getattr" and len(node.args) >= 2:
                base, name = self._qual(node.args[0]), self.fold_str(node.args[1])
                return f"{base}.{name}" if base and name else None
            if func in IMPORTERS and node.args:
                return self.fold_str(node.args[0])
            return None
        if isinstance(node, ast.Subscript):
            key = self.fold_str(node.slice)
            if key is None:
                return None
            if isinstance(node.value, ast.Call) and self._qual(node.value.func) in ("builtins.vars",):
                base = self._qual(node.value.args[0]) if node.value.args else None
                return f"{base}.{key}" if base else None
            if isinstance(node.value, ast.Call) and self._qual(node.value.func) in ("builtins.globals",):
                return self.aliases.get(key) or (f"builtins.{key}" if key in BUILTIN_NAMES else None)
            base = self._qual(node.value)
            if base == "sys.modules":
                return key
            if base and base.endswith(".__dict__"):
                return f"{base[: -len('.__dict__')]}.{key}"
            if base == "builtins":
                return f"builtins.{key}"
        return None

    def fold_str(self, node: ast.AST) -> str | None:
        """The text an expression folds to: `Folding` supplies it, and names need it for computed getattr."""
        raise NotImplementedError
