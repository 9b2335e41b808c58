"""The trajectory page's helpers write what the template code they replaced wrote, faster: one
shared pygments formatter and a lexer per file name, the timeline in one pass; hostile text is
always escaped."""

from __future__ import annotations

from django.template import Context, Template
from django.utils import translation
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import JsonLexer, PythonLexer

from webapp.templatetags.crucible import highlight_file, highlight_json, timeline_ticks

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


def test_the_timeline_filter_writes_what_the_template_loop_wrote() -> None:
    loop = Template(
        "{% for number, action, reward, on_page in timeline %}"
        '<a class="tick action-{{ action }}" href="?page={{ on_page }}#step-{{ number }}" data-step="{{ number }}" '
        'title="#{{ number }} {{ action }}{% if reward is not None %} reward {{ reward }}{% endif %}"></a>'
        "{% endfor %}"
    )
    ticks = [(1, "run_command", None, 1), (2, 'x" onclick="alert(1)', 0.25, 1), (101, "submit", 1.0, 2)]
    with translation.override("en"):
        assert timeline_ticks(ticks) == loop.render(Context({"timeline": ticks}))
    assert 'onclick="' not in timeline_ticks(ticks)
