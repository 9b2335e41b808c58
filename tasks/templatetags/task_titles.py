"""`{{ task|task_title }}`: a line people can recognise a task by, from its statement."""

from __future__ import annotations

import re

from django import template

register = template.Library()

TITLE_MAX = 90
# Markdown that says nothing about the task: heading marks, bold, code ticks, bullets, quotes
# (not underscores: they are part of names like parse_config).
DECORATION = re.compile(r"^[#>*\-\s]+|[*`]+")
# An image or a link says its text; its URL (a statement's remote image, say) is no title.
LINKED = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


@register.filter
def task_title(task: object) -> str:
    """The statement's first line with words in it, stripped of markdown and cut to a line."""
    statement = getattr(task, "statement", "") or ""
    for line in statement.splitlines():
        text = " ".join(DECORATION.sub("", LINKED.sub(r"\1", line)).split())
        if text:
            return text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 1].rstrip() + "…"
    return ""
