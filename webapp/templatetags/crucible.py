"""Rendering helpers for untrusted text: task statements, patches, agent output.

Everything here either escapes or goes through a renderer configured to emit no raw
HTML, because statements, patches and observations come from repositories and agents.
"""

from __future__ import annotations

import functools
import html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from core.vocabulary import ActionType
from patches import side_by_side, snippet_diff, unified_rows

register = template.Library()

# "js-default": raw HTML in the source is escaped and links are checked, so
# `javascript:` and `data:` URLs never become clickable.
_markdown = MarkdownIt("js-default").enable("table")


def _image_as_link(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """An image in a statement becomes a link a reviewer may choose to follow: a statement comes
    from a task archive, and an image the page fetched by itself would tell its author who opened
    the task and when (a beacon). The CSP's img-src 'self' blocks such fetches too."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = escapeHtml(str(token.attrGet("src") or ""))
    return f'<a class="md-image" href="{src}" rel="nofollow noopener noreferrer">[image: {escapeHtml(alt)}]</a>'


_markdown.add_render_rule("image", _image_as_link)

# A diff as (css class, line) rows, and as per-file rows for two columns; the template escapes each line.
register.filter("diff_lines", unified_rows)
register.filter("side_by_side", side_by_side)


@register.filter
def markdown_safe(text: str) -> SafeString:
    return mark_safe(_markdown.render(text or ""))  # noqa: S308 - html disabled above


@register.filter
def pretty_json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.simple_tag(takes_context=True)
def query_with(context: Any, **changes: Any) -> str:
    """The current query string with some parameters replaced (for paging links)."""
    params = context["request"].GET.copy()
    for key, value in changes.items():
        if value in (None, ""):
            params.pop(key, None)
        else:
            params[key] = value
    return params.urlencode()


@register.filter
def or_dash(value: Any) -> Any:
    """A dash for a missing value, but 0 and False still show (a temperature of 0 is real)."""
    return "–" if value is None or value == "" else value


@register.filter
def action_diff(step: Any) -> str:
    """An edit or write action as a unified diff (empty for other actions)."""
    data = getattr(step, "action_input", None)
    if not isinstance(data, dict):
        return ""
    path = str(data.get("path", "file"))
    if step.action_type == ActionType.EDIT_FILE and isinstance(data.get("old_text"), str):
        before, after = data["old_text"], str(data.get("new_text", ""))
    elif step.action_type == ActionType.WRITE_FILE and isinstance(data.get("content"), str):
        before, after = "", data["content"]
    else:
        return ""
    return snippet_diff(path, before, after)


# The most ticks the step timeline draws: each is an element the browser lays out, and 10,000
# of them cost it a quarter of a second. Past this, a tick stands for a run of steps.
TIMELINE_TICKS = 1000
# The action a tick standing for a run of steps is drawn as: the one a reviewer looks for first.
_TELLING: dict[str, int] = {
    ActionType.INVALID: 0,
    ActionType.SUBMIT: 1,
    ActionType.EDIT_FILE: 2,
    ActionType.WRITE_FILE: 2,
}


@register.filter
def timeline_ticks(timeline: Sequence[tuple[int, str, float | None]]) -> SafeString:
    """The step timeline, one link per step (or per run of steps, past TIMELINE_TICKS), built in
    one pass: as template code a page of 1,000 steps cost 6,000 variable lookups, most of the
    page's time. A tick links to the page from its (first) step on. Every value is escaped."""
    per_tick = -(-len(timeline) // TIMELINE_TICKS)
    parts = []
    if per_tick <= 1:
        kinds: dict[str, str] = {}
        for number, action, reward in timeline:
            step = int(number)
            kind = kinds.get(action) or kinds.setdefault(action, html.escape(str(action)))
            title = f"#{step} {kind}" + (f" reward {html.escape(str(reward))}" if reward is not None else "")
            parts.append(f'<a class="tick action-{kind}" href="?from={step}#step-{step}" title="{title}"></a>')
        return mark_safe("".join(parts))  # noqa: S308 - built from escaped values and integers
    for start in range(0, len(timeline), per_tick):
        run = timeline[start : start + per_tick]
        first, last = int(run[0][0]), int(run[-1][0])
        counts = Counter(str(action) for _, action, _ in run)
        kind = html.escape(min(counts, key=lambda a: (_TELLING.get(a, len(_TELLING)), -counts[a])))
        title = f"#{first}–#{last}: " + ", ".join(f"{n} {html.escape(a)}" for a, n in counts.most_common())
        parts.append(f'<a class="tick action-{kind}" href="?from={first}#step-{first}" title="{title}"></a>')
    return mark_safe("".join(parts))  # noqa: S308 - built from escaped values and integers


@functools.cache
def _highlighting() -> tuple[Any, Any, Any, Any]:
    """One formatter and the plain lexers for every snippet of a page: building a formatter
    builds its style tables, which cost more than highlighting a short snippet."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import JsonLexer, TextLexer

    return highlight, HtmlFormatter(nowrap=True), JsonLexer(), TextLexer(stripnl=False)


@register.filter
def highlight_json(value: Any) -> SafeString:
    """An action's input, pretty-printed and highlighted (pygments escapes the text)."""
    highlight, formatter, json_lexer, text_lexer = _highlighting()
    text = pretty_json(value)
    lexer = text_lexer if isinstance(value, str) else json_lexer
    return mark_safe(highlight(text, lexer, formatter))  # noqa: S308 - pygments output is escaped


@register.filter
def highlight_file(text: str, path: Any) -> SafeString:
    """A read_file observation highlighted by the file's type (plain text when unknown)."""
    highlight, formatter, _, text_lexer = _highlighting()
    name = path.get("path", "") if isinstance(path, dict) else str(path or "")
    lexer = _file_lexer(PurePosixPath(name).name) or text_lexer
    return mark_safe(highlight(text or "", lexer, formatter))  # noqa: S308 - pygments output is escaped


@functools.lru_cache(maxsize=512)
def _file_lexer(basename: str) -> Any:
    """The lexer for a file's name, or None (shared: a lexer keeps no state between texts, and
    finding one by name tries every lexer's patterns)."""
    from pygments.lexers import get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        return get_lexer_for_filename(basename, stripnl=False) if basename else None
    except ClassNotFound:
        return None
