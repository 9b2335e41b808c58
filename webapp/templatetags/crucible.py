"""Rendering helpers for untrusted text: task statements, patches, agent output.

Everything here either escapes or goes through a renderer configured to emit no raw
HTML, because statements, patches and observations come from repositories and agents.
"""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

register = template.Library()

# "js-default": raw HTML in the source is escaped and links are checked, so
# `javascript:` and `data:` URLs never become clickable.
_markdown = MarkdownIt("js-default").enable("table")


@register.filter
def markdown_safe(text: str) -> SafeString:
    return mark_safe(_markdown.render(text or ""))  # noqa: S308 - html disabled above


@register.filter
def diff_lines(patch: str) -> list[tuple[str, str]]:
    """(css class, line) pairs for a unified diff; the template escapes each line."""
    rows: list[tuple[str, str]] = []
    for line in (patch or "").splitlines():
        if line.startswith(("diff --git", "index ", "--- ", "+++ ", "new file", "deleted file")):
            css = "diff-meta"
        elif line.startswith("@@"):
            css = "diff-hunk"
        elif line.startswith("+"):
            css = "diff-add"
        elif line.startswith("-"):
            css = "diff-del"
        else:
            css = "diff-ctx"
        rows.append((css, line))
    return rows


@register.filter
def pretty_json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.filter
def clip(text: str, limit: int = 20000) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit]


@register.filter
def longer_than(text: str, limit: int = 20000) -> bool:
    return len(text or "") > limit


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
