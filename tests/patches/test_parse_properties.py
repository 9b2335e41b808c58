"""Properties of the diff parser, over edits and garbage hypothesis makes up.

Any edit of a file, written as a unified diff (Crucible's own builder, or Python's difflib as
another tool would), parses into hunks that, applied to the old text, give the new text. Any
text at all, and any damage to a valid diff, either parses or raises PatchError: never
another exception, so a hostile patch can only ever be refused.
"""

from __future__ import annotations

import difflib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patches import FilePatch, FileStatus, PatchError, parse, render, split_lines, text_patch

BOUNDED = settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# Few distinct lines, so edits leave context that matches in several places (the hard case).
LINES = st.sampled_from(["", "a", "b", "x = 1", "    return x", "-- ", "+", " ", "\\", "@@ -1 +1 @@", "é\t\r"])
FILES = st.lists(LINES, max_size=30).map(lambda lines: "".join(line + "\n" for line in lines))


@st.composite
def texts(draw: st.DrawFn) -> str:
    text = draw(FILES)
    if text and draw(st.booleans()):
        text = text[:-1]  # no newline at the end of the file
    return text


@st.composite
def edits(draw: st.DrawFn) -> tuple[str, str]:
    """A file and an edit of it: lines removed, replaced and inserted at random places."""
    before = draw(texts())
    lines = split_lines(before)
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(lines)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        new = draw(LINES) + "\n"
        if action == "insert" or at == len(lines):
            lines.insert(at, new)
        elif action == "delete":
            del lines[at]
        else:
            lines[at] = new
    after = "".join(lines)
    if draw(st.booleans()) and after.endswith("\n"):
        after = after[:-1]
    return before, after


def apply(before: str, patch: FilePatch) -> str:
    """The patch's hunks applied to `before`, strictly: every line a hunk expects must be there."""
    old = split_lines(before)
    out: list[str] = []
    at = 0
    for hunk in patch.hunks:
        # A hunk that holds no old line names the line before it (0: the top of the file).
        start = hunk.old_start - 1 if hunk.old_len else hunk.old_start
        expected = split_lines(hunk.before())
        assert start >= at and old[start : start + len(expected)] == expected, (hunk.header, expected)
        out += old[at:start] + split_lines(hunk.after())
        at = start + len(expected)
    return "".join(out + old[at:])


@BOUNDED
@given(edits(), st.booleans())
def test_any_edit_as_a_git_diff_parses_back_into_the_same_edit(edit: tuple[str, str], recount: bool) -> None:
    before, after = edit
    built = text_patch("pkg/mod.py", before, after)
    if built is None:
        assert before == after
        return
    text = render(built)
    [parsed] = parse(text, recount=recount)
    assert parsed.path == "pkg/mod.py" and parsed.status is FileStatus.MODIFIED
    assert apply(before, parsed) == after
    assert render(parsed) == text


@BOUNDED
@given(texts(), st.sampled_from(["added", "deleted"]))
def test_a_new_or_deleted_file_parses_into_its_whole_content(content: str, how: str) -> None:
    before, after = (None, content) if how == "added" else (content, None)
    built = text_patch("new/file.txt", before, after)
    assert built is not None
    [parsed] = parse(render(built))
    assert parsed.status == how
    assert apply(before or "", parsed) == (after or "")


@BOUNDED
@given(edits())
def test_difflibs_unified_diff_parses_into_the_same_edit(edit: tuple[str, str]) -> None:
    """Another tool's diff (difflib writes no 'No newline' marker, so whole lines only)."""
    before, after = (text if text.endswith("\n") or not text else text + "\n" for text in edit)
    text = "".join(difflib.unified_diff(split_lines(before), split_lines(after), "a/m.py", "b/m.py"))
    if not text:
        assert before == after
        return
    [parsed] = parse(text)
    assert (parsed.old_path, parsed.new_path, parsed.git) == ("m.py", "m.py", False)
    assert apply(before, parsed) == after


@BOUNDED
@given(st.text(max_size=400), st.booleans())
def test_any_text_parses_or_raises_patch_error_only(text: str, recount: bool) -> None:
    try:
        parse(text, recount=recount)
    except PatchError as exc:
        assert str(exc).startswith("line ")


@BOUNDED
@given(edits(), st.data(), st.booleans())
def test_a_damaged_diff_parses_or_raises_patch_error_only(
    edit: tuple[str, str], data: st.DataObject, recount: bool
) -> None:
    built = text_patch("m.py", *edit)
    lines = (render(built) if built else "diff --git a/m.py b/m.py\n").split("\n")
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(lines) - 1))
        damage = data.draw(st.sampled_from(["drop", "double", "cut", "garble", "header"]))
        if damage == "drop":
            del lines[at]
        elif damage == "double":
            lines.insert(at, lines[at])
        elif damage == "cut":
            lines[at] = lines[at][: data.draw(st.integers(0, max(0, len(lines[at]) - 1)))]
        elif damage == "garble":
            lines[at] = data.draw(st.text(max_size=20))
        else:
            numbers = data.draw(st.lists(st.integers(-5, 10**12).map(str), min_size=4, max_size=4))
            lines[at] = "@@ -{},{} +{},{} @@".format(*numbers)
        if not lines:
            lines = [""]
    try:
        parse("\n".join(lines), recount=recount)
    except PatchError as exc:
        assert str(exc).startswith("line ")
