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
from dataclasses import dataclass
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


def parse(path: str, data: bytes, *, strict: bool = True) -> Tree | None:
    """`data` parsed by `path`'s grammar; None when no grammar reads it or, when `strict`, it does
    not parse cleanly (a syntax error, a missing token, an extension of the language the grammar lacks)."""
    name = grammar_for(path)
    if name is None:
        return None
    tree = Parser(language(name)).parse(data)
    return None if strict and tree.root_node.has_error else tree


# Literals whose text is data, not code: kept whole as one token. A template literal is not among
# them: its `${...}` is code, read token by token, and only its text is blanked.
_WHOLE = frozenset({"string", "regex", "interpreted_string_literal", "raw_string_literal", "rune_literal"})
_BLANKED = frozenset({"string", "interpreted_string_literal", "raw_string_literal", "rune_literal"})
_ESCAPE = re.compile(r"\\u(?:\{([0-9a-fA-F]{1,6})\}|([0-9a-fA-F]{4}))")


@dataclass(frozen=True)
class _Reading:
    """One walk of a file's tree (byte offsets): its comments, the string text a skeleton blanks,
    and its other tokens in order, each (text, line, byte span)."""

    comments: list[tuple[int, int]]
    literals: list[tuple[int, int]]
    tokens: list[tuple[str, int, tuple[int, int]]]


@functools.lru_cache(maxsize=4)
def _reading(path: str, source: str) -> _Reading | None:
    """`source` read by `path`'s grammar, once for `blanked` and `flattened` both. The walk keeps
    its own stack: a query cursor took 4 s over 100 KB of nested parentheses."""
    tree = parse(path, source.encode("utf-8"), strict=False) if grammar_for(path) else None
    if tree is None:
        return None
    reading = _Reading([], [], [])
    stack: list[Node] = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in _COMMENTS:
            reading.comments.append((node.start_byte, node.end_byte))
            continue
        if node.type in _BLANKED or node.type == "template_string":
            reading.literals.extend(_text_of(node))
        if node.child_count and node.type not in _WHOLE:
            stack.extend(reversed(node.children))
            continue
        text = (node.text or b"").decode("utf-8", "replace")
        if node.type.endswith("identifier") and "\\u" in text:
            text = _ESCAPE.sub(lambda m: _char(m[1] or m[2]), text)
        if text in ("(", "[") and reading.tokens and reading.tokens[-1][0] == "?.":
            reading.tokens.pop()  # `a?.(x)` calls as `a(x)` does, `a?.[k]` indexes as `a[k]`
        if text:
            reading.tokens.append((text, node.start_point.row + 1, (node.start_byte, node.end_byte)))
    return reading


def _text_of(literal: Node) -> list[tuple[int, int]]:
    """The byte spans of a literal's text between its quotes, a template's `${...}` left out."""
    spans, inside = [], literal.start_byte + 1  # past the opening quote
    for child in literal.children if literal.type == "template_string" else []:
        if child.type == "template_substitution":
            spans.append((inside, child.start_byte))
            inside = child.end_byte
    spans.append((inside, max(inside, literal.end_byte - 1)))
    return spans


def blanked(path: str, source: str) -> tuple[str, str] | None:
    """(code, skeleton) of `source` as `path`'s grammar reads it: comments blanked in both, string
    literals' contents blanked in the skeleton too (a template's `${...}` stays code). Every newline
    and every offset is kept, so a line or offset means the same in the source and both. None when
    no grammar reads the file; a file that does not parse cleanly is read as tree-sitter recovers it.

    A lexer cannot tell a regular expression literal from a division or a comment: `/\\/*/` opens a
    comment to it, and whatever follows is hidden from a scan of the code. The grammar can."""
    reading = _reading(path, source)
    if reading is None:
        return None
    char_at = _char_offsets(source, source.encode("utf-8"))
    code, skeleton = list(source), list(source)
    for start, end in reading.comments:
        _blank(code, source, char_at(start), char_at(end))
        _blank(skeleton, source, char_at(start), char_at(end))
    for start, end in reading.literals:
        _blank(skeleton, source, char_at(start), char_at(end))
    return "".join(code), "".join(skeleton)


@dataclass(frozen=True)
class Flat:
    """A file's code as one line of tokens (`flattened`): `text`, and for each token where it is in
    `text` (`starts`, `ends`), its line in the source (`lines`) and its byte range there (`spans`)."""

    text: str
    starts: list[int]
    ends: list[int]
    lines: list[int]
    spans: list[tuple[int, int]]

    def line_at(self, offset: int) -> int:
        """The source line of the token at `offset` of `text`."""
        return self.lines[max(0, bisect.bisect_right(self.starts, offset) - 1)] if self.lines else 1

    def between(self, start_byte: int, end_byte: int) -> tuple[int, int]:
        """Where in `text` the tokens inside the source's byte range [start_byte, end_byte) are."""
        first = bisect.bisect_left(self.spans, (start_byte, -1))
        last = bisect.bisect_left(self.spans, (end_byte, -1)) - 1
        while last >= first and self.spans[last][1] > end_byte:
            last -= 1
        return (self.starts[first], self.ends[last]) if last >= first else (0, 0)


def flattened(path: str, source: str) -> Flat | None:
    """The file's tokens without comments, in one line, with no space between them but one between
    two word characters (`return true`, `func init(){`): what a line pattern reads as `process.exit(`
    however the file spells it. The layout a patch can choose goes: line breaks and any white space
    between tokens (JavaScript's U+FEFF, U+2028, vertical tab among them), `?.` read as `.`, and a
    `\\u0065` escape in a name read as the letter it is. None when no grammar reads the file."""
    reading = _reading(path, source)
    if reading is None:
        return None
    parts: list[str] = []
    starts, ends, size = [], [], 0
    for text, _, _ in reading.tokens:
        piece = "." if text == "?." else text
        if parts and _word(parts[-1][-1]) and _word(piece[0]):
            parts.append(" ")
            size += 1
        starts.append(size)
        parts.append(piece)
        size += len(piece)
        ends.append(size)
    lines = [line for _, line, _ in reading.tokens]
    return Flat("".join(parts), starts, ends, lines, [span for _, _, span in reading.tokens])


def _word(char: str) -> bool:
    return char.isalnum() or char in ("_", "$")


def _char(code: str) -> str:
    value = int(code, 16)
    return chr(value) if value <= 0x10FFFF else "?"


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
