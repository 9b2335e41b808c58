"""Diffs built from texts and from trees are ones git applies to reproduce the after side exactly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patches import FileStatus, LineKind, PatchError, parse, render, text_patch, tree_patches
from tests.patches.conftest import GitRepo, snapshot

BEFORE = "".join(f"line {i}\n" for i in range(1, 40))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (BEFORE, BEFORE.replace("line 5\n", "line five\n").replace("line 30\n", "")),
        ("one\ntwo", "one\ntwo\nthree"),  # no final newline before
        ("one\ntwo\n", "one\nTWO"),  # none after
        ("a\r\nb\r\n", "a\r\nc\r\n"),
        ("x = 1\n\x0c\ny = 2\n", "x = 1\n\x0c\ny = 3\n"),  # a form feed is not a line break to git
        ("", "new\n"),
        ("old\n", ""),
    ],
)
def test_a_text_patch_applies_with_git_and_gives_the_after_text(
    repo: GitRepo, tmp_path: Path, before: str, after: str
) -> None:
    repo.write("f.txt", before)
    repo.commit()
    patch = text_patch("f.txt", before, after)
    assert patch is not None and patch.text == render(patch) and parse(patch.text) == [patch]
    applied = repo.apply_to_base(patch.text, tmp_path / "applied")
    assert (applied / "f.txt").read_bytes() == after.encode()


def test_a_text_patch_matches_what_git_diff_prints_for_a_simple_edit(repo: GitRepo) -> None:
    after = BEFORE.replace("line 20\n", "line twenty\n")
    repo.write("f.txt", BEFORE)
    repo.commit()
    repo.write("f.txt", after)
    from_git = parse(repo.diff())[0]
    built = text_patch("f.txt", BEFORE, after)
    assert built is not None
    # git also names the enclosing "function" (here the line above the hunk); difflib does not.
    assert [(h.header.split(" @@")[0], h.lines) for h in built.hunks] == [
        (h.header.split(" @@")[0], h.lines) for h in from_git.hunks
    ]


def test_a_text_patch_marks_a_last_line_without_a_newline() -> None:
    patch = text_patch("f.txt", "a\nb", "a\nc")
    assert patch is not None
    assert [line.kind for line in patch.hunks[0].lines] == [
        LineKind.CONTEXT,
        LineKind.REMOVED,
        LineKind.NO_NEWLINE,
        LineKind.ADDED,
        LineKind.NO_NEWLINE,
    ]
    assert patch.text.endswith("+c\n\\ No newline at end of file\n")


def test_text_patches_for_new_and_deleted_files_say_so() -> None:
    created = text_patch("pkg/new.py", None, "x = 1\n")
    deleted = text_patch("pkg/old.py", "x = 1\n", None)
    assert created is not None and deleted is not None
    assert (created.status, created.old_path, created.new_mode) == (FileStatus.ADDED, None, "100644")
    assert created.text.startswith("diff --git a/pkg/new.py b/pkg/new.py\nnew file mode 100644\n--- /dev/null\n")
    assert (deleted.status, deleted.new_path) == (FileStatus.DELETED, None)
    assert "deleted file mode 100644\n--- a/pkg/old.py\n+++ /dev/null\n" in deleted.text


def test_no_patch_between_equal_texts() -> None:
    assert text_patch("f.txt", "same\n", "same\n") is None


def test_a_tree_patch_takes_the_before_tree_to_the_after_tree(repo: GitRepo, tmp_path: Path) -> None:
    repo.write("keep.txt", "keep\n")
    repo.write("edit.py", BEFORE)
    repo.write("gone/old.txt", "bye\n")
    repo.write("img.bin", bytes(range(256)))
    repo.write("run.sh", "echo\n")
    os.symlink("keep.txt", repo.root / "link")
    repo.commit()
    before = repo.export(tmp_path / "before")
    after = repo.export(tmp_path / "after tree")  # a space in the root must not leak into the paths
    (after / "edit.py").write_text(BEFORE.replace("line 9\n", "line nine\n"))
    (after / "gone" / "old.txt").unlink()
    (after / "new dir").mkdir()
    (after / "new dir" / "new.txt").write_text("hello\n")
    (after / "img.bin").write_bytes(bytes(range(255, -1, -1)))
    (after / "run.sh").chmod(0o755)
    (after / "link").unlink()
    os.symlink("edit.py", after / "link")

    patches = tree_patches(before, after)

    assert {p.path: p.status for p in patches} == {
        "edit.py": FileStatus.MODIFIED,
        "gone/old.txt": FileStatus.DELETED,
        "img.bin": FileStatus.MODIFIED,
        "link": FileStatus.MODIFIED,
        "new dir/new.txt": FileStatus.ADDED,
        "run.sh": FileStatus.MODIFIED,
    }
    assert next(p for p in patches if p.path == "link").symlink
    assert next(p for p in patches if p.path == "img.bin").binary_hunks
    text = render(patches)
    assert str(tmp_path).lstrip("/") not in text
    applied = repo.apply_to_base(text, tmp_path / "applied")
    assert snapshot(applied) == snapshot(after)


def test_a_tree_patch_between_equal_trees_is_empty(tmp_path: Path) -> None:
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "f.txt").write_text("same\n")
    assert tree_patches(tmp_path / "a", tmp_path / "b") == []


def test_a_tree_patch_needs_two_directories(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    with pytest.raises(PatchError, match="is not a directory"):
        tree_patches(tmp_path / "a", tmp_path / "missing")
