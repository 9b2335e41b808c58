"""The tree-sitter grammars of the languages besides Python, loaded in one place: which grammar
parses a file (by its extension), a parse that says when it failed, and a file's code shape.

Used by the mutation builder (its operator sites), the Jest option reader (a config module read as
data), history judging (whether a commit changed any code at all) and the Go/JavaScript patch scan
(`blanked`: where the comments and string literals are, as the language reads them).

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

import bisect
import functools
import re
from collections.abc import Callable
from pathlib import Path

import tree_sitter_go
import tree_sitter_javascript
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser, Query, QueryCursor, Tree

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


def parse(path: str, data: bytes, *, strict: bool = True) -> Tree | None:
    """`data` parsed by `path`'s grammar; None when no grammar reads it or, when `strict`, it does
    not parse cleanly (a syntax error, a missing token, an extension of the language the grammar lacks)."""
    name = grammar_for(path)
    if name is None:
        return None
    tree = Parser(language(name)).parse(data)
    return None if strict and tree.root_node.has_error else tree


# What `blanked` reads: comments, string literals, and a template literal's `${...}`, which is code.
_LITERAL_QUERIES = {
    GO: "(comment) @comment [(interpreted_string_literal) (raw_string_literal) (rune_literal)] @string",
    JAVASCRIPT: "[(comment) (html_comment)] @comment [(string) (template_string)] @string",
    TYPESCRIPT: "(comment) @comment [(string) (template_string)] @string",
    TSX: "(comment) @comment [(string) (template_string)] @string",
}


@functools.cache
def _literals(name: str) -> Query:
    return Query(language(name), _LITERAL_QUERIES[name])


def blanked(path: str, source: str) -> tuple[str, str] | None:
    """(code, skeleton) of `source` as `path`'s grammar reads it: comments blanked in both, string
    literals' contents blanked in the skeleton too (a template's `${...}` stays code). Every newline
    and every offset is kept, so a line or offset means the same in the source and both. None when
    no grammar reads the file; a file that does not parse cleanly is read as tree-sitter recovers it.

    A lexer cannot tell a regular expression literal from a division or a comment: `/\\/*/` opens a
    comment to it, and whatever follows is hidden from a scan of the code. The grammar can."""
    name = grammar_for(path)
    if name is None:
        return None
    data = source.encode("utf-8")
    tree = parse(path, data, strict=False)
    if tree is None:
        return None
    char_at = _char_offsets(source, data)
    code, skeleton = list(source), list(source)
    captures = QueryCursor(_literals(name)).captures(tree.root_node)
    for node in captures.get("comment", []):
        _blank(code, source, char_at(node.start_byte), char_at(node.end_byte))
        _blank(skeleton, source, char_at(node.start_byte), char_at(node.end_byte))
    for node in captures.get("string", []):
        inside = node.start_byte + 1  # past the opening quote
        for child in node.children:
            if child.type == "template_substitution":
                _blank(skeleton, source, char_at(inside), char_at(child.start_byte))
                inside = child.end_byte
        _blank(skeleton, source, char_at(inside), char_at(max(inside, node.end_byte - 1)))
    return "".join(code), "".join(skeleton)


def _blank(chars: list[str], source: str, start: int, end: int) -> None:
    chars[start:end] = [c if c == "\n" else " " for c in source[start:end]]


def _char_offsets(source: str, data: bytes) -> Callable[[int], int]:
    """Byte offset in `data` (source as UTF-8) -> character offset in `source`."""
    if len(data) == len(source):
        return lambda offset: offset
    starts = [0]
    for char in source:
        starts.append(starts[-1] + len(char.encode("utf-8")))
    return lambda offset: bisect.bisect_left(starts, offset)


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
