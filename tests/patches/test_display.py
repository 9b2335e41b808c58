"""Rows for the review pages: the unified view, two columns, and an edit action's diff."""

from __future__ import annotations

from patches import side_by_side, snippet_diff, text_patch, unified_rows
from tests.patches.conftest import GitRepo

EDIT = (
    "diff --git a/pkg/m.py b/pkg/m.py\n"
    "index 1111111..2222222 100644\n"
    "--- a/pkg/m.py\n"
    "+++ b/pkg/m.py\n"
    "@@ -1,5 +1,5 @@ def f():\n"
    " a\n"
    "-b\n"
    "-c\n"
    "+B\n"
    " d\n"
    "-e\n"
    "+E\n"
    "+F\n"
    "diff --git a/new.txt b/new.txt\n"
    "new file mode 100644\n"
    "--- /dev/null\n"
    "+++ b/new.txt\n"
    "@@ -0,0 +1 @@\n"
    "+x\n"
    "\\ No newline at end of file\n"
)


def test_removed_lines_sit_beside_the_lines_that_replace_them() -> None:
    assert side_by_side(EDIT) == [
        {
            "name": "pkg/m.py",
            "rows": [
                ("@@ -1,5 +1,5 @@ def f():", "diff-hunk", "@@ -1,5 +1,5 @@ def f():", "diff-hunk"),
                ("a", "diff-ctx", "a", "diff-ctx"),
                ("b", "diff-del", "B", "diff-add"),
                ("c", "diff-del", "", ""),
                ("d", "diff-ctx", "d", "diff-ctx"),
                ("e", "diff-del", "E", "diff-add"),
                ("", "", "F", "diff-add"),
            ],
        },
        {
            "name": "new.txt",
            "rows": [
                ("@@ -0,0 +1 @@", "diff-hunk", "@@ -0,0 +1 @@", "diff-hunk"),
                ("", "", "x", "diff-add"),
                (" No newline at end of file", "diff-ctx", " No newline at end of file", "diff-ctx"),
            ],
        },
    ]


def test_a_plain_diff_is_named_by_its_old_label() -> None:
    text = snippet_diff("src/a.py", "x = 1\n", "x = 2\n")
    assert [f["name"] for f in side_by_side(text)] == ["a/src/a.py"]


def test_mode_changes_and_binary_files_get_one_row_each(repo: GitRepo) -> None:
    repo.write("run.sh", "echo\n")
    repo.write("img.bin", b"\x00\x01")
    repo.commit()
    (repo.root / "run.sh").chmod(0o755)
    repo.write("img.bin", b"\x00\x02")
    files = {f["name"]: f["rows"] for f in side_by_side(repo.diff("--binary"))}
    assert files == {
        "img.bin": [("binary file", "diff-meta", "binary file", "diff-meta")],
        "run.sh": [("mode 100644", "diff-meta", "mode 100755", "diff-meta")],
    }


def test_an_unreadable_diff_has_no_side_by_side_view_but_keeps_its_unified_rows() -> None:
    broken = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,x +1 @@\n-a\n+b\n"
    assert side_by_side(broken) == []
    assert side_by_side("") == [] and side_by_side("not a diff\n") == []
    assert [css for css, _ in unified_rows(broken)] == [
        "diff-meta",
        "diff-meta",
        "diff-meta",
        "diff-hunk",
        "diff-del",
        "diff-add",
    ]


def test_unified_rows_classify_every_line_as_written() -> None:
    assert unified_rows(EDIT)[:9] == [
        ("diff-meta", "diff --git a/pkg/m.py b/pkg/m.py"),
        ("diff-meta", "index 1111111..2222222 100644"),
        ("diff-meta", "--- a/pkg/m.py"),
        ("diff-meta", "+++ b/pkg/m.py"),
        ("diff-hunk", "@@ -1,5 +1,5 @@ def f():"),
        ("diff-ctx", " a"),
        ("diff-del", "-b"),
        ("diff-del", "-c"),
        ("diff-add", "+B"),
    ]
    assert unified_rows(None) == []  # type: ignore[arg-type]


def test_an_edit_snippet_diff_has_plain_labels_and_no_newline_markers() -> None:
    assert snippet_diff("m.py", "return a - b", "return a + b") == (
        "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-return a - b\n+return a + b\n"
    )
    assert snippet_diff("m.py", "", "x\ny\n") == "--- a/m.py\n+++ b/m.py\n@@ -0,0 +1,2 @@\n+x\n+y\n"
    assert snippet_diff("m.py", "same", "same") == ""


def test_a_built_patch_shows_the_same_rows_as_git_output_for_it(repo: GitRepo) -> None:
    before = "".join(f"{i}\n" for i in range(12))
    after = before.replace("5\n", "five\n")
    repo.write("n.txt", before)
    repo.commit()
    repo.write("n.txt", after)
    built = text_patch("n.txt", before, after)
    assert built is not None
    # Lines of digits give git no enclosing "function" to name, so the hunk headers match too.
    assert side_by_side(built.text) == side_by_side(repo.diff())
