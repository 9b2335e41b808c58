"""The tree-sitter grammars of the languages besides Python, loaded in one place: which grammar
parses a file (by its extension), a parse that says when it failed, and a file's code shape.

Used by the mutation builder (its operator sites), the Jest option reader (a config module read as
data) and history judging (whether a commit changed any code at all).

A file's *shape* is its tokens without layout and comments, but with its line breaks: two versions
with the same shape run the same. A commit whose code files all keep their shape (a doc-comment
pass, re-indented lines) has nothing for a hidden test to catch, and judging skips it before
validation spends two test runs to find the same. Some comments are code to a tool, and stay in
the shape: Go's directives (`//go:build`, `//go:embed`, `// +build`, `//export`, `//line`, and
every comment of a cgo file, whose preamble is C), TypeScript's `/// <reference>` and `@ts-`
comments (ts-jest type-checks), and the `@jsx`/`@flow` pragmas. When in doubt the answer is
"changed": a wrong "unchanged" would drop a real task, a wrong "changed" only costs the validation
that judges it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

import tree_sitter_go
import tree_sitter_javascript
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser, Tree

GO, JAVASCRIPT, TYPESCRIPT, TSX = "go", "javascript", "typescript", "tsx"
GRAMMARS = {
    ".go": GO,
    **dict.fromkeys((".js", ".mjs", ".cjs", ".jsx"), JAVASCRIPT),
    **dict.fromkeys((".ts", ".mts", ".cts"), TYPESCRIPT),
    ".tsx": TSX,
}
_COMMENTS = frozenset({"comment", "html_comment"})
_GO_DIRECTIVE = re.compile(rb"^//(go:|line |export |\s*\+build)")
_JS_PRAGMA = re.compile(rb"^///\s*<|@ts-|@jsx|@flow")
_CGO_IMPORT = re.compile(rb'^import\s+"C"', re.MULTILINE)


def grammar_for(path: str) -> str | None:
    """The grammar that parses `path` ("go", "javascript", "typescript", "tsx"), by extension."""
    return GRAMMARS.get(Path(path).suffix)


@functools.cache
def language(name: str) -> Language:
    raw = {
        GO: tree_sitter_go.language,
        JAVASCRIPT: tree_sitter_javascript.language,
        TYPESCRIPT: tree_sitter_typescript.language_typescript,
        TSX: tree_sitter_typescript.language_tsx,
    }[name]()
    return Language(raw)


def parse(path: str, data: bytes) -> Tree | None:
    """`data` parsed by `path`'s grammar; None when no grammar reads it or it does not parse cleanly
    (a syntax error, a missing token, an extension of the language the grammar lacks)."""
    name = grammar_for(path)
    if name is None:
        return None
    tree = Parser(language(name)).parse(data)
    return None if tree.root_node.has_error else tree


def shape(path: str, data: bytes) -> tuple[tuple[str, bytes, bool], ...] | None:
    """The file's tokens in order, each (kind, text, whether a line break comes before it), without
    the comments no tool reads; None when it does not parse, or when any text between its tokens is
    more than white space (a grammar's hidden token: then nothing can be said about what changed).

    Line breaks stay in the shape because both languages read them: Go inserts a semicolon at the
    end of a line, JavaScript where a line break follows `return`, `throw`, `break`... (and a block
    comment that spans lines is a line break to it), and tree-sitter's JavaScript grammar parses
    `return` and `x` on two lines as `return x`, which the language never does.
    """
    tree = parse(path, data)
    if tree is None:
        return None
    keep_comment = _go_comment_kept(data) if grammar_for(path) == GO else _JS_PRAGMA.search
    tokens = []
    done = 0  # every byte before this one is in a token or white space
    broken = False  # whether a line break came since the last token kept
    stack: list[Node] = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.child_count and node.type not in _COMMENTS:
            stack.extend(reversed(node.children))
            continue
        gap = data[done : node.start_byte]
        if gap.strip():
            return None
        done = max(done, node.end_byte)
        text = node.text or b""
        broken = broken or b"\n" in gap
        if node.type in _COMMENTS and not keep_comment(text):
            broken = broken or b"\n" in text
            continue
        tokens.append((node.type, text, broken))
        broken = False
    return None if data[done:].strip() else tuple(tokens)


def _go_comment_kept(data: bytes) -> Callable[[bytes], object]:
    if _CGO_IMPORT.search(data):
        return lambda text: True  # a cgo preamble is C source
    return _GO_DIRECTIVE.match
