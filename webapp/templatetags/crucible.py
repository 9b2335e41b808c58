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
    import difflib

    data = getattr(step, "action_input", None)
    if not isinstance(data, dict):
        return ""
    path = str(data.get("path", "file"))
    if step.action_type == "edit_file" and isinstance(data.get("old_text"), str):
        before, after = data["old_text"], str(data.get("new_text", ""))
    elif step.action_type == "write_file" and isinstance(data.get("content"), str):
        before, after = "", data["content"]
    else:
        return ""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@register.filter
def side_by_side(patch: str) -> list[dict[str, Any]]:
    """Rows for a two-column diff: removed lines on the left beside the lines that replace them."""
    files: list[dict[str, Any]] = []
    rows: list[tuple[str, str, str, str]] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            left = removed[i] if i < len(removed) else ""
            right = added[i] if i < len(added) else ""
            rows.append((left, "diff-del" if i < len(removed) else "", right, "diff-add" if i < len(added) else ""))
        removed.clear()
        added.clear()

    for line in (patch or "").splitlines():
        if line.startswith("diff --git") or (line.startswith("--- ") and not files):
            flush()
            rows = []
            files.append({"name": line.split(" b/")[-1] if " b/" in line else line[4:], "rows": rows})
        elif line.startswith(("--- ", "+++ ", "index ", "new file", "deleted file", "similarity", "rename")):
            continue
        elif line.startswith("@@"):
            flush()
            rows.append((line, "diff-hunk", line, "diff-hunk"))
        elif line.startswith("-"):
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
        else:
            flush()
            rows.append((line[1:], "diff-ctx", line[1:], "diff-ctx"))
    flush()
    return files


@register.filter
def highlight_json(value: Any) -> SafeString:
    """An action's input, pretty-printed and highlighted (pygments escapes the text)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import JsonLexer, TextLexer

    text = pretty_json(value)
    lexer = TextLexer() if isinstance(value, str) else JsonLexer()
    return mark_safe(highlight(text, lexer, HtmlFormatter(nowrap=True)))  # noqa: S308 - pygments output is escaped


@register.filter
def highlight_file(text: str, path: Any) -> SafeString:
    """A read_file observation highlighted by the file's type (plain text when unknown)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import TextLexer, get_lexer_for_filename
    from pygments.util import ClassNotFound

    name = path.get("path", "") if isinstance(path, dict) else str(path or "")
    try:
        lexer = get_lexer_for_filename(name, stripnl=False)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False)
    return mark_safe(highlight(text or "", lexer, HtmlFormatter(nowrap=True)))  # noqa: S308 - pygments output is escaped
