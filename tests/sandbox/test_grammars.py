"""sandbox.grammars: what "the code did not change" means for Go and JavaScript/TypeScript (shape), and
where comments and strings are (blanked).

A wrong "unchanged" drops a real task from history building, so each case here that must count as
a change is one a comment-stripping shortcut would get wrong.
"""

from __future__ import annotations

import pytest

from sandbox import grammars
from sandbox.grammars import grammar_for, parse, shape

SAME = [
    ("x.go", b"package x\n\n// Add adds.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n",
     b"package x\n/* Add returns\n   the sum. */\nfunc Add(a,b int) int {\n    return a+b // why\n\n}\n"),
    ("x.ts", b"/** doc */\nexport function f(s: string) { return `a ${s}` /* why */ }\n",
     b"// doc\n// more doc\nexport function f( s : string ) {  return `a ${s}`  }\n"),
    ("x.js", b"const a = 1 // one\n", b"const a = 1  /* one, as before */\n"),
    ("x.tsx", b"export const E = () => <div>{x}</div>\n", b"export const E = () =>  <div>{ x }</div>\n"),
]  # fmt: skip

CHANGED = [
    ("a string's text", "x.go", b'package x\nvar s = "a  b"\n', b'package x\nvar s = "a b"\n'),
    ("a raw string's text", "x.go", b"package x\nvar s = `a  b`\n", b"package x\nvar s = `a b`\n"),
    ("a template's text", "x.ts", b"const s = `a  ${b}`\n", b"const s = `a ${b}`\n"),
    ("a regular expression", "x.js", b"const r = /a  b/g\n", b"const r = /a b/g\n"),
    ("JSX text", "x.jsx", b"const e = <p>a  b</p>\n", b"const e = <p>a b</p>\n"),
    ("an operator", "x.go", b"package x\nfunc f(a, b int) int { return a + b }\n",
     b"package x\nfunc f(a, b int) int { return a - b }\n"),
    ("a build constraint", "x.go", b"//go:build linux\n\npackage x\n", b"//go:build darwin\n\npackage x\n"),
    ("an old build tag", "x.go", b"// +build linux\n\npackage x\n", b"package x\n"),
    ("an embed directive", "x.go", b'package x\n\nimport _ "embed"\n\n//go:embed a.txt\nvar s string\n',
     b'package x\n\nimport _ "embed"\n\n//go:embed b.txt\nvar s string\n'),
    ("a cgo preamble", "x.go", b'package x\n\n// #include <stdio.h>\nimport "C"\n',
     b'package x\n\n// #include <stdlib.h>\nimport "C"\n'),
    ("a type-check directive", "x.ts", b"// @ts-expect-error\nf(1)\n", b"f(1)\n"),
    ("a triple-slash reference", "x.ts", b'/// <reference types="node" />\nf(1)\n', b"f(1)\n"),
    ("a JSX pragma", "x.jsx", b"/** @jsx h */\nconst e = <p />\n", b"const e = <p />\n"),
    ("a line break after return", "x.js", b"function f() {\n  return\n  x\n}\n", b"function f() {\n  return x\n}\n"),
    ("a line break in a block comment", "x.js", b"function f() {\n  return /*\n */ x\n}\n",
     b"function f() {\n  return /* */ x\n}\n"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "before", "after"), SAME, ids=[p for p, *_ in SAME])
def test_layout_and_comments_keep_the_shape(path: str, before: bytes, after: bytes) -> None:
    assert shape(path, before) is not None
    assert shape(path, before) == shape(path, after)


@pytest.mark.parametrize(("why", "path", "before", "after"), CHANGED, ids=[w for w, *_ in CHANGED])
def test_what_a_program_or_a_tool_reads_changes_the_shape(why: str, path: str, before: bytes, after: bytes) -> None:
    assert shape(path, before) != shape(path, after), why


def test_a_file_that_does_not_parse_has_no_shape() -> None:
    assert shape("x.go", b"package x\nfunc (\n") is None
    assert shape("x.ts", b"const = ;\n") is None
    assert shape("x.py", b"x = 1\n") is None  # no grammar here: Python has its own (ast)
    assert parse("x.rs", b"fn main() {}") is None and grammar_for("x.rs") is None
    assert grammar_for("a/b.mts") == "typescript" and grammar_for("c.cjs") == "javascript"


def test_blanked_reads_comments_and_strings_as_the_grammar_does_keeping_every_offset() -> None:
    source = 'const t = `é${"q" /* c */}`; const r = /a\\/*/; exit(0) // gone\n/* gone */ x\n'
    read = grammars.blanked("a.js", source)
    assert read is not None
    code, skeleton = read
    assert len(code) == len(skeleton) == len(source) and code.count("\n") == source.count("\n")
    assert "gone" not in code and "exit(0)" in code and "/a\\/*/" in code  # the regex is code, not a comment
    assert '"q"' in code and "é" in code
    assert '${" "        }' in skeleton and "é" not in skeleton  # a template's ${...} stays code
    go = grammars.blanked("a.go", 'package a\nvar s = "x//" + `y` // c\n')
    assert go is not None
    go_code, go_skeleton = go
    assert go_code == 'package a\nvar s = "x//" + `y`     \n' and '"   " + ` `' in go_skeleton
    assert grammars.blanked("a.py", "x = 1") is None
    broken = grammars.blanked("a.ts", "let = ; // c\nexit(0)\n")  # recovered, not refused
    assert broken is not None and "// c" not in broken[0] and "exit(0)" in broken[0]


def test_flattened_reads_a_cheat_however_it_is_laid_out() -> None:
    source = "process\n  ?.exit?.(7); // no\nx.\\u0065xit(1)\ufeff; const s = 'a  b'; return true\n"
    flat = grammars.flattened("a.js", source)
    assert flat is not None
    assert flat.text == "process.exit(7);x.exit(1);const s='a  b';return true"
    assert flat.line_at(flat.text.index("exit(7)")) == 2 and flat.line_at(flat.text.index("x.exit")) == 3
    go = grammars.flattened("a.go", "package a\nfunc init() {\n\tos .\n\tExit(7)\n}\n")
    assert go is not None and go.text == "package a func init(){os.Exit(7)}"
    assert grammars.flattened("a.py", "x = 1") is None
