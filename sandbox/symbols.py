"""Where a symbol is defined, in Python, Go and JavaScript/TypeScript sources: search_symbol's reader.

Python is read with its own parser (functions, classes, methods as Class.method). Go and
JavaScript/TypeScript are read line by line with patterns built around the escaped name: their
definitions start a line (Go's at column 0 or inside a `const (`/`var (`/`type (` block), so a
declaration's shape is enough without a grammar. The name is literal text: it is checked to be an
identifier path before a pattern is built, and escaped inside it.

A workspace is what untrusted code left: only regular files (never a link, a FIFO or a device)
under a size bound are read, each line only up to a bound, and the results are bounded.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from patches import pysource

MAX_SYMBOL_CHARS = 200
# A line longer than this (minified code, generated tables) is read only this far.
MAX_LINE_CHARS = 1000
# Identifiers, joined by dots for a member (Class.method, the receiver type of a Go method):
# letters, digits, `_`, and `$` (JavaScript); never regex or glob syntax.
_SYMBOL = re.compile(r"(?:[^\W\d]|\$)[\w$]*(?:\.(?:[^\W\d]|\$)[\w$]*)*")
PY_SUFFIXES = frozenset({".py"})
GO_SUFFIXES = frozenset({".go"})
JS_SUFFIXES = frozenset({".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx"})
SOURCE_SUFFIXES = PY_SUFFIXES | GO_SUFFIXES | JS_SUFFIXES
# Words a line can start with that look like a method `name(...) {` in a class body but are not one.
_JS_KEYWORDS = frozenset({"if", "for", "while", "switch", "catch", "with", "return", "function", "do", "else"})


class SymbolError(ValueError):
    """The name asked for is not an identifier path."""


@dataclass(frozen=True)
class Definition:
    line: int
    kind: str  # def, class; func, method, type, const, var; function, let, exports, interface, enum
    qualname: str

    def __str__(self) -> str:
        return f"{self.kind} {self.qualname}"


def check_symbol(name: str) -> str:
    if not isinstance(name, str) or len(name) > MAX_SYMBOL_CHARS or not _SYMBOL.fullmatch(name):
        raise SymbolError(
            "a symbol is a name like parse_config, Config.load (a class's method) or Buffer.Write "
            f"(a Go method by its receiver type), at most {MAX_SYMBOL_CHARS} characters"
        )
    return name


def definitions(suffix: str, data: bytes, name: str) -> list[Definition]:
    """The definitions of `name` (or of `Owner.name`) in one file's source, in line order."""
    last = name.rsplit(".", 1)[-1]
    if last.encode() not in data:
        return []  # most files: nothing to parse
    if suffix in PY_SUFFIXES:
        found = list(_python(data))
    elif suffix in GO_SUFFIXES:
        found = list(_go(_lines(data), last))
    elif suffix in JS_SUFFIXES:
        found = list(_javascript(_lines(data), last))
    else:
        return []
    return [d for d in found if d.qualname == name or d.qualname.rsplit(".", 1)[-1] == name]


def _lines(data: bytes) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        yield number, line[:MAX_LINE_CHARS]


def _python(data: bytes) -> Iterator[Definition]:
    try:
        tree = pysource.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return  # not parseable Python (often mid-edit): it defines nothing to find
    for qualname, node in _py_definitions(tree):
        yield Definition(node.lineno, "class" if isinstance(node, ast.ClassDef) else "def", qualname)


PyDefinition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _py_definitions(tree: ast.AST, prefix: str = "") -> list[tuple[str, PyDefinition]]:
    found: list[tuple[str, PyDefinition]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            qualname = f"{prefix}{node.name}"
            found.append((qualname, node))
            if isinstance(node, ast.ClassDef):
                found += _py_definitions(node, qualname + ".")
    return found


def _go(lines: Iterator[tuple[int, str]], name: str) -> Iterator[Definition]:
    n = re.escape(name)
    func = re.compile(rf"^func\s+{n}\s*[\[(]")
    # func (r *T) Name(, func (T) Name(, func (s *Set[K]) Name[
    method = re.compile(rf"^func\s*\(\s*(?:\w+\s+)?\*?\s*(\w+)\s*(?:\[[^\]]*\])?\s*\)\s*{n}\s*[\[(]")
    single = re.compile(rf"^(type|const|var)\s+(?:\w+\s*,\s*)*{n}\b")
    block_start = re.compile(r"^(type|const|var)\s*\(\s*(?://.*)?$")
    in_block = re.compile(rf"^\s+(?:\w+\s*,\s*)*{n}\b(?!\s*[.(:])")
    block = ""
    for number, line in lines:
        if block:
            if line.startswith(")"):
                block = ""
            elif in_block.match(line):
                yield Definition(number, block, name)
            continue
        if started := block_start.match(line):
            block = started[1]
        elif func.match(line):
            yield Definition(number, "func", name)
        elif found := method.match(line):
            yield Definition(number, "method", f"{found[1]}.{name}")
        elif found := single.match(line):
            yield Definition(number, found[1], name)


_JS_EXPORT = r"(?:export\s+(?:default\s+)?)?(?:declare\s+)?"


def _javascript(lines: Iterator[tuple[int, str]], name: str) -> Iterator[Definition]:
    n = re.escape(name)
    # `(?![\w$])`: a JavaScript name ends where no identifier character follows (`\b` fails after `$`).
    end = r"(?![\w$])"
    function = re.compile(rf"^\s*{_JS_EXPORT}(?:async\s+)?function\s*\*?\s*{n}\s*[<(]")
    klass = re.compile(rf"^\s*{_JS_EXPORT}(?:abstract\s+)?class\s+{n}{end}")
    any_class = re.compile(r"^(\s*)" + _JS_EXPORT + r"(?:abstract\s+)?class\s+([\w$]+)")
    declared = re.compile(rf"^{_JS_EXPORT}(const|let|var)\s+{n}\s*[:=]")
    commonjs = re.compile(rf"^(?:module\.)?exports\.{n}\s*=")
    typed = re.compile(rf"^\s*{_JS_EXPORT}(interface|enum|type)\s+{n}{end}(?:\s*[<={{]|\s*$|\s+extends)")
    modifiers = r"(?:(?:static|async|get|set|public|private|protected|readonly|override|abstract)\s+)*"
    member = re.compile(rf"^(\s+){modifiers}(?:\*\s*)?#?({n})\s*(?:<[^>]*>)?\s*\([^)]*\)?[^;=]*\{{?\s*$")
    owner: tuple[str, int] | None = None  # the class whose body the line is in, and its indentation
    for number, line in lines:
        stripped = line.strip()
        if owner is not None and stripped.startswith("}") and _indent(line) <= owner[1]:
            owner = None
        if started := any_class.match(line):
            owner = (started[2], len(started[1]))
        if function.match(line):
            yield Definition(number, "function", name)
        elif klass.match(line):
            yield Definition(number, "class", name)
        elif found := declared.match(line):
            yield Definition(number, found[1], name)
        elif commonjs.match(line):
            yield Definition(number, "exports", name)
        elif found := typed.match(line):
            yield Definition(number, found[1], name)
        elif owner is not None and (found := member.match(line)) and found[2] not in _JS_KEYWORDS:
            if len(found[1]) > owner[1]:
                yield Definition(number, "method", f"{owner[0]}.{name}")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
