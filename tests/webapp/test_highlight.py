"""Highlighted snippets on the trajectory page: one shared formatter and lexer per file name, the
same HTML as a fresh formatter gives, and hostile text always escaped."""

from __future__ import annotations

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import JsonLexer, PythonLexer

from webapp.templatetags.crucible import highlight_file, highlight_json

HOSTILE = "<script>alert(1)</script>"


def test_shared_highlighting_is_what_a_fresh_formatter_gives() -> None:
    code = f"def f():\n    return '{HOSTILE}'\n"
    assert highlight_file(code, {"path": "pkg/mod.py"}) == highlight(
        code, PythonLexer(stripnl=False), HtmlFormatter(nowrap=True)
    )
    value = {"path": "a.py", "text": HOSTILE}
    assert highlight_json(value).count("<script>") == 0
    assert str(highlight_json(value)) == highlight(
        highlight_json.__globals__["pretty_json"](value), JsonLexer(), HtmlFormatter(nowrap=True)
    )


def test_files_are_lexed_by_their_name_and_unknown_ones_as_text() -> None:
    assert 'class="' in highlight_file("all:\n\techo hi\n", {"path": "Makefile"})
    plain = highlight_file(f"{HOSTILE}\n", {"path": "notes.unknown-kind"})
    assert "&lt;script&gt;" in plain and 'class="' not in plain
    assert "&lt;script&gt;" in highlight_file(HOSTILE, None)
