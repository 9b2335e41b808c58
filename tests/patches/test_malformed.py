"""Text that is not a readable diff fails with a PatchError that says where and why."""

from __future__ import annotations

import pytest

from patches import PatchError, parse, render

GOOD = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace("@@ -1,2 +1,2 @@", "@@ -1,x +1,2 @@"), r"line 4: bad hunk header"),
        (
            GOOD.replace("@@ -1,2 +1,2 @@", "@@ -1,3 +1,3 @@"),
            r"line 8: the patch ends inside the hunk that starts on line 4",
        ),
        (GOOD.replace("+TWO\n", "+TWO\n+three\n"), None),  # more lines than the header says: only text after the patch
        (GOOD.replace(" one\n", "*one\n"), r"line 5: '\*one' is not a hunk line"),
        (GOOD.replace("-two\n", "-two\n-extra\n"), r"line 7: the hunk that starts on line 4 has more lines than"),
        ("@@ -1 +1 @@\n-a\n+b\n", r"line 1: a hunk with no file header"),
        ("diff --git a/x b/x\n--- a/x\n@@ -1 +1 @@\n-a\n+b\n", r"line 2: a '---' line with no '\+\+\+' line"),
        ("--- a/x\n+++ b/x\n", r"line 3: a ---/\+\+\+ file header with no hunk after it"),
        ("--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n", r"line 1: both sides are /dev/null"),
        ("diff --cc a.txt\nindex 1,2..3\n", r"line 1: combined diffs"),
        ("diff --git a/x b/x\nindex nothex..abc 100644\n", r"line 2: bad index line"),
        ("diff --git a/x b/x\nold mode 100644\nnew mode 75\n", r"line 3: bad file mode '75'"),
        ("diff --git a/x b/y\nsimilarity index 140%\nrename from x\nrename to y\n", r"line 2: bad similarity index"),
        (
            "diff --git a/x b/y\nsimilarity index 90%\nrename from x\n",
            r"line 4: a rename needs both its 'from' and 'to'",
        ),
        ("diff --git a/x y b/z w b/q\nold mode 100644\nnew mode 100755\n", r"line 1: cannot tell the file names apart"),
        (
            "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n\\ No newline at end of file\n-a\n",
            r"line 5: a 'No newline at end of file' marker that follows no line",
        ),
        ('diff --git "a/x b/x\n', r"unterminated quoted name"),
        ('diff --git "a/\\q" "b/\\q"\n', r"bad escape"),
        ('diff --git "a/x\\000y" "b/x\\000y"\n', r"a path cannot contain a NUL byte"),
    ],
)
def test_a_malformed_diff_is_refused_with_the_line_and_the_reason(text: str, message: str | None) -> None:
    if message is None:
        assert render(parse(text)) == GOOD  # git apply ignores text after a complete hunk, and so do we
        return
    with pytest.raises(PatchError, match=message):
        parse(text)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("literal 5\nzcmZQzOv=my00M6TI{*Lx\n\n", r"corrupt line in a GIT binary patch"),  # wrong length character
        ("literal 6\nMcmZQzOv=my00M6TI{*Lx\n\n", r"line 5: the literal data .* inflates to 5 bytes, not 6"),
        ("literal 5\nMcmZQzOv=mz00M6TI{*Lx\n\n", r"line 5: the literal data of a GIT binary patch does not inflate"),
        ("literally 5\n", r"expected 'literal N' or 'delta N'"),
    ],
)
def test_a_corrupt_binary_patch_is_refused(data: str, message: str) -> None:
    header = "diff --git a/b.bin b/b.bin\nnew file mode 100644\nindex 0000000..88768ef\nGIT binary patch\n"
    assert parse(header + "literal 5\nMcmZQzOv=my00M6TI{*Lx\n\nliteral 0\nHcmV?d00001\n\n")[0].binary
    with pytest.raises(PatchError, match=message):
        parse(header + data)


def test_a_patch_error_is_a_value_error() -> None:
    assert issubclass(PatchError, ValueError)


def test_text_with_no_file_patch_in_it_is_an_empty_list() -> None:
    assert parse("") == [] and parse("just a commit message\n\nwith lines\n") == []


def test_wrong_hunk_counts_are_refused_unless_recounted_as_git_apply_recount_does() -> None:
    sloppy = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,5 +1,9 @@\n one\n-two\n+TWO\n\n"
    with pytest.raises(PatchError, match="ends inside the hunk"):
        parse(sloppy)
    [patch] = parse(sloppy, recount=True)
    assert (patch.hunks[0].old_len, patch.hunks[0].new_len) == (2, 2)  # the trailing blank line is padding
    assert render(patch) == GOOD


def test_a_recounted_plain_diff_stops_at_the_next_files_header() -> None:
    text = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-c\n+d\n"
    assert [p.path for p in parse(text, recount=True)] == ["x", "y"]
    assert render(parse(text, recount=True)) == text


def test_blank_lines_between_hunks_are_read_past_when_recounting() -> None:
    text = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n\n@@ -9 +9 @@\n-c\n+d\n"
    with pytest.raises(PatchError, match="line 7: a hunk with no file header"):
        parse(text)
    [patch] = parse(text, recount=True)
    assert [h.header for h in patch.hunks] == ["@@ -1 +1 @@", "@@ -9 +9 @@"] and patch.text == text
