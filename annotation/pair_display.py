"""What a reviewer is shown of a pair: the blind payload (the review page and the API share it)
and the two patches as highlighted diffs.

Blind means: the task, the two patches and the hidden-test results of each, on the sides this
reviewer was given. No policy, model, checkpoint, batch, reward number or trajectory id: any of
them would tell the reviewer which system wrote which patch. Everything from an agent stays
text: pygments escapes what it highlights, the rest is escaped here or by the template.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from datetime import datetime
from typing import Any, TypedDict

from django.core.cache import cache
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from annotation.models import Assignment, Comparison
from annotation.pairs import verified_tests
from patches.display import unified_rows
from patches.model import FilePatch, LineKind, PatchError
from patches.parse import parse
from trajectories.models import Trajectory

logger = logging.getLogger(__name__)

# Past this many lines a patch is shown as plain text: highlighting costs more than it helps.
HIGHLIGHT_MAX_LINES = 20_000
TEST_LISTS = {"fail_to_pass": "tests the task must make pass", "pass_to_pass": "tests that must keep passing"}
_FORMATTER = HtmlFormatter(nowrap=True)


class TestCount(TypedDict):
    list: str
    description: str
    passed: int
    total: int


class SidePayload(TypedDict):
    patch: str
    tests: list[TestCount]
    trajectory_url: str


class BlindPair(TypedDict):
    id: int
    set: str
    task_id: str
    statement: str
    left: SidePayload
    right: SidePayload
    expires_at: datetime


def blind_pair(assignment: Assignment) -> BlindPair:
    """The pair as this reviewer sees it: left is B when their assignment is swapped."""
    comparison: Comparison = assignment.comparison
    pair = {
        t.pk: t
        for t in Trajectory.objects.filter(pk__in=[comparison.trajectory_a_id, comparison.trajectory_b_id]).only(
            "pk", "patch"
        )
    }
    tests = verified_tests(pair)
    a, b = pair[comparison.trajectory_a_id], pair[comparison.trajectory_b_id]
    left, right = (b, a) if assignment.swapped else (a, b)
    statement = comparison.task.statement if comparison.task is not None else ""
    return BlindPair(
        id=comparison.pk,
        set=comparison.comparison_set.name,
        task_id=comparison.task_ref,
        statement=statement,
        left=_side(comparison, "left", left, tests),
        right=_side(comparison, "right", right, tests),
        expires_at=assignment.expires_at,
    )


def _side(comparison: Comparison, name: str, trajectory: Trajectory, tests: dict[int, Any]) -> SidePayload:
    return SidePayload(
        patch=trajectory.patch,
        tests=test_counts(tests.get(trajectory.pk)),
        trajectory_url=reverse("annotation:compare-trajectory", args=[comparison.pk, name]),
    )


def test_counts(tests: dict[str, Any] | None) -> list[TestCount]:
    """Passed / total per hidden-test list; never the reward computed from them."""
    out: list[TestCount] = []
    for name, counts in (tests or {}).items():
        if isinstance(counts, dict):
            out.append(
                TestCount(
                    list=str(name),
                    description=TEST_LISTS.get(str(name), str(name).replace("_", " ")),
                    passed=int(counts.get("passed") or 0),
                    total=int(counts.get("total") or 0),
                )
            )
    return out


# --- diffs as HTML ------------------------------------------------------------------------
#
# Pygments costs about 0.1 ms a line: two 2,000-line patches would take most of a second. The
# review page therefore shows each patch at once as escaped text with the diff's colours, and
# the highlighted version comes in its own request (htmx, on load) that is cached by the
# patch's content, so the next reviewer of the same patch gets it from the cache. The rows are
# joined here rather than looped over in a template: a template loop over thousands of rows
# costs more than the page's whole budget.

CACHE_PREFIX = "annotation:diff-html:v1:"
CACHE_SECONDS = 24 * 3600

_SIGNS = {LineKind.CONTEXT: " ", LineKind.ADDED: "+", LineKind.REMOVED: "-"}
_CSS = {LineKind.CONTEXT: "diff-ctx", LineKind.ADDED: "diff-add", LineKind.REMOVED: "diff-del"}


def plain_diff_html(text: str) -> SafeString:
    """The diff as written, every line escaped, coloured by its kind (no syntax highlighting)."""
    if not (text or "").strip():
        return SafeString('<p class="muted">empty patch</p>')
    rows = [_row(css, "", escape(line)) for css, line in unified_rows(text)]
    return SafeString(_table("", rows))


def cached_diff_html(text: str) -> SafeString | None:
    """The highlighted diff if some request already made it, else None."""
    html = cache.get(_cache_key(text))
    return SafeString(html) if isinstance(html, str) else None


def highlighted_diff_html(text: str) -> SafeString:
    """Per file, the diff's lines with the code highlighted for the file's language (cached).

    The old side (context and removed lines) and the new side (context and added lines) are
    each highlighted in one pass, so a string or comment that spans lines is coloured as the
    file would be; a diff that cannot be read is shown as its text, escaped.
    """
    cached = cached_diff_html(text)
    if cached is not None:
        return cached
    html = _highlighted(text)
    cache.set(_cache_key(text), str(html), CACHE_SECONDS)
    return html


def _cache_key(text: str) -> str:
    return CACHE_PREFIX + hashlib.sha256((text or "").encode("utf-8", "surrogatepass")).hexdigest()


def _highlighted(text: str) -> SafeString:
    if not (text or "").strip():
        return plain_diff_html(text)
    try:
        files = parse(text, recount=True)
    except PatchError as exc:
        logger.info("unreadable diff shown as text: %s", exc)
        return plain_diff_html(text)
    if sum(len(h.lines) for fp in files for h in fp.hunks) > HIGHLIGHT_MAX_LINES:
        return plain_diff_html(text)
    return SafeString("".join(_file(fp) for fp in files))


def _row(css: str, sign: str, html: str) -> str:
    # css and sign are this module's constants; html is escaped (by pygments or escape()).
    return f'<tr class="{css}"><td class="sign">{sign}</td><td><pre>{html}</pre></td></tr>'


def _table(caption: str, rows: list[str]) -> str:
    head = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f'<table class="cdiff">{head}{"".join(rows)}</table>'


def _file(fp: FilePatch) -> str:
    rows: list[str] = []
    if fp.old_path != fp.new_path and fp.old_path and fp.new_path:
        rows.append(_row("diff-meta", "", escape(f"renamed from {fp.old_path}")))
    if fp.binary:
        rows.append(_row("diff-meta", "", "binary file"))
    lexer = _lexer(_lexer_key(fp.path))
    old_side = [ln.text for h in fp.hunks for ln in h.lines if ln.kind in (LineKind.CONTEXT, LineKind.REMOVED)]
    new_side = [ln.text for h in fp.hunks for ln in h.lines if ln.kind in (LineKind.CONTEXT, LineKind.ADDED)]
    old_html, new_html = iter(_highlight(old_side, lexer)), iter(_highlight(new_side, lexer))
    for hunk in fp.hunks:
        rows.append(_row("diff-hunk", "", escape(hunk.header)))
        for line in hunk.lines:
            if line.kind is LineKind.NO_NEWLINE:
                rows.append(_row("diff-meta", "", "\\ No newline at end of file"))
                continue
            if line.kind is LineKind.CONTEXT:
                next(old_html)
                html = next(new_html)
            else:
                html = next(old_html if line.kind is LineKind.REMOVED else new_html)
            rows.append(_row(_CSS[line.kind], _SIGNS[line.kind], html))
    return _table(fp.path, rows)


def _highlight(lines: list[str], lexer: Lexer) -> list[str]:
    if not lines:
        return []
    out = highlight("\n".join(lines) + "\n", lexer, _FORMATTER).split("\n")
    if out and out[-1] == "":
        out.pop()
    if len(out) != len(lines):
        # A carriage return or form feed inside a line is a line break to pygments; the rows
        # would no longer match, so these lines go unhighlighted.
        return [escape(line) for line in lines]
    return out  # pygments escapes the text it highlights


def _lexer_key(path: str) -> str:
    """What picks a lexer: the extension, or the whole name (Makefile, Dockerfile) when there is none."""
    name = path.rsplit("/", 1)[-1]
    return "x." + name.rsplit(".", 1)[-1] if "." in name else name


@functools.lru_cache(maxsize=256)
def _lexer(name: str) -> Lexer:
    try:
        return get_lexer_for_filename(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)
