"""The trajectory page's helpers write what the template code they replaced wrote, faster: one
shared pygments formatter and a lexer per file name, the timeline in one pass; hostile text is
always escaped."""

from __future__ import annotations

import re

from django.template import Context, Template
from django.utils import translation
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import JsonLexer, PythonLexer

from webapp.templatetags.crucible import TIMELINE_TICKS, highlight_file, highlight_json, timeline_ticks

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
        "{% for number, action, reward in timeline %}"
        '<a class="tick action-{{ action }}" href="?from={{ number }}#step-{{ number }}" '
        'title="#{{ number }} {{ action }}{% if reward is not None %} reward {{ reward }}{% endif %}"></a>'
        "{% endfor %}"
    )
    ticks = [(1, "run_command", None), (2, 'x" onclick="alert(1)', 0.25), (101, "submit", 1.0)]
    with translation.override("en"):
        assert timeline_ticks(ticks) == loop.render(Context({"timeline": ticks}))
    assert 'onclick="' not in timeline_ticks(ticks)


def test_past_the_tick_limit_a_tick_stands_for_a_run_of_steps_drawn_as_its_most_telling_action() -> None:
    timeline: list[tuple[int, str, float | None]] = [(n, "run_command", 0.0) for n in range(1, 10_001)]
    timeline[4_321] = (4_322, 'x" onclick="alert(1)', None)
    timeline[9_999] = (10_000, "submit", 1.0)
    html = timeline_ticks(timeline)
    tick = re.compile(r'<a class="tick action-([^"]*)" href="\?from=(\d+)#step-\2" title="([^"]*)"></a>')
    ticks = tick.findall(html)
    assert len(ticks) == TIMELINE_TICKS and tick.sub("", html) == ""
    assert [int(first) for _, first, _ in ticks] == list(range(1, 10_001, 10))  # every step in one run
    assert ticks[-1][0] == "submit" and ticks[-1][2] == "#9991–#10000: 9 run_command, 1 submit"
    assert ticks[432][2] == "#4321–#4330: 9 run_command, 1 x&quot; onclick=&quot;alert(1)"
    assert 'onclick="' not in html
