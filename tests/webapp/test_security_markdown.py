"""A statement's images are never fetched by the page: they become links a reviewer may follow."""

from __future__ import annotations

from types import SimpleNamespace

from tasks.templatetags.task_titles import task_title
from webapp.templatetags.crucible import markdown_safe

BEACON = "https://tracker.example/p.png?task=7&who=reviewer"


def test_a_remote_image_in_a_statement_is_rendered_as_a_link_not_an_image() -> None:
    html = str(markdown_safe(f'Fix it. ![diagram "x" <b>]({BEACON})\n\n![ref][r]\n\n[r]: //cdn.example/x.gif'))
    assert "<img" not in html
    assert '<a class="md-image" href="https://tracker.example/p.png?task=7&amp;who=reviewer"' in html
    assert "[image: diagram &quot;x&quot; &lt;b&gt;]" in html
    assert 'href="//cdn.example/x.gif"' in html
    # Raw HTML stays text, as before.
    assert "&lt;img src=" in str(markdown_safe(f'<img src="{BEACON}">'))


def test_a_task_title_says_an_images_text_not_its_url() -> None:
    task = SimpleNamespace(statement=f"![parse_config crashes]({BEACON}) on empty input")
    assert task_title(task) == "parse_config crashes on empty input"
