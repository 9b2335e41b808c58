"""No template carries what the Content-Security-Policy refuses: a page that did would break in
the browser (the browser test covers the main pages; this covers every template, cheaply)."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
COMMENT = re.compile(r"\{#.*?#\}|\{% comment %\}.*?\{% endcomment %\}", re.DOTALL)
REFUSED = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.IGNORECASE),
    "inline style element": re.compile(r"<style\b", re.IGNORECASE),
    "style attribute": re.compile(r"\sstyle\s*=", re.IGNORECASE),
    "event handler attribute": re.compile(r"\son[a-z]+\s*=", re.IGNORECASE),
    "javascript: URL": re.compile(r"javascript:", re.IGNORECASE),
    "remote resource": re.compile(r"\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.IGNORECASE),
}


def test_no_template_has_inline_script_style_handlers_or_remote_resources() -> None:
    found = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        text = COMMENT.sub("", path.read_text())
        found += [f"{path.relative_to(TEMPLATES)}: {what}" for what, pattern in REFUSED.items() if pattern.search(text)]
    assert found == []
