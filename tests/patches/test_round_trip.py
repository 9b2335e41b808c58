"""Real git output parses into the model and renders back to the same text, byte for byte."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patches import FileStatus, LineKind, parse, render
from tests.patches.conftest import GitRepo, snapshot

PNG = bytes(range(256)) * 3  # NUL bytes make git treat it as binary


def round_trip(text: str, **options: bool) -> list:  # type: ignore[type-arg]
    patches = parse(text)
    assert render(patches, **options) == text
    assert "".join(p.text for p in patches) == text
    return patches


def test_a_text_edit_round_trips_with_its_hunks_and_line_numbers(repo: GitRepo) -> None:
    repo.write("pkg/mod.py", "".join(f"line {i}\n" for i in range(1, 30)))
    repo.commit()
    repo.write(
        "pkg/mod.py",
        "".join(f"line {i}\n" for i in range(1, 30))
        .replace("line 3\n", "line three\n")
        .replace("line 25\n", "line 25\nline 25b\n"),
    )
    [patch] = round_trip(repo.diff())
    assert (patch.old_path, patch.new_path, patch.status) == ("pkg/mod.py", "pkg/mod.py", FileStatus.MODIFIED)
    assert patch.old_mode == patch.new_mode == "100644" and patch.old_hash and patch.new_hash
    assert [(h.old_start, h.old_len, h.new_start, h.new_len) for h in patch.hunks] == [(1, 6, 1, 6), (23, 6, 23, 7)]
    assert patch.added_lines() == [(3, "line three"), (26, "line 25b")]
    assert patch.removed_lines() == [(3, "line 3")]


def test_a_function_context_header_round_trips(repo: GitRepo) -> None:
    repo.write("m.py", "def f():\n" + "".join(f"    x{i} = {i}\n" for i in range(20)))
    repo.commit()
    repo.write("m.py", (repo.root / "m.py").read_text().replace("x15 = 15", "x15 = -15"))
    [patch] = round_trip(repo.diff())
    assert patch.hunks[0].header == "@@ -14,7 +14,7 @@ def f():" and patch.hunks[0].section == "def f():"


def test_new_and_deleted_files_round_trip_with_dev_null_sides(repo: GitRepo) -> None:
    repo.write("old.txt", "bye\n")
    repo.commit()
    (repo.root / "old.txt").unlink()
    repo.write("new.txt", "hello\n")
    repo.write("empty.txt", "")
    patches = round_trip(repo.diff())
    by_path = {p.path: p for p in patches}
    assert by_path["new.txt"].status is FileStatus.ADDED and by_path["new.txt"].old_path is None
    assert by_path["new.txt"].new_mode == "100644"
    assert by_path["old.txt"].status is FileStatus.DELETED and by_path["old.txt"].new_path is None
    assert by_path["empty.txt"].status is FileStatus.ADDED and by_path["empty.txt"].hunks == []


def test_a_missing_final_newline_round_trips_with_its_marker(repo: GitRepo) -> None:
    repo.write("a.txt", "one\ntwo")
    repo.commit()
    repo.write("a.txt", "one\nTWO")
    [patch] = round_trip(repo.diff())
    kinds = [line.kind for line in patch.hunks[0].lines]
    assert kinds == [LineKind.CONTEXT, LineKind.REMOVED, LineKind.NO_NEWLINE, LineKind.ADDED, LineKind.NO_NEWLINE]
    assert patch.hunks[0].before() == "one\ntwo" and patch.hunks[0].after() == "one\nTWO"


def test_a_rename_with_an_edit_round_trips_with_its_similarity(repo: GitRepo) -> None:
    body = "".join(f"row {i}\n" for i in range(20))
    repo.write("src/old_name.py", body)
    repo.commit()
    (repo.root / "src/old_name.py").unlink()
    repo.write("src/new_name.py", body.replace("row 7\n", "row seven\n"))
    [patch] = round_trip(repo.diff("-M"))
    assert patch.status is FileStatus.RENAMED
    assert (patch.old_path, patch.new_path, patch.paths) == (
        "src/old_name.py",
        "src/new_name.py",
        ("src/old_name.py", "src/new_name.py"),
    )
    assert patch.similarity is not None and 80 <= patch.similarity < 100


def test_a_pure_rename_round_trips_without_hunks(repo: GitRepo) -> None:
    repo.write("a.txt", "same\n")
    repo.commit()
    os.rename(repo.root / "a.txt", repo.root / "b.txt")
    [patch] = round_trip(repo.diff("-M"))
    assert (patch.status, patch.similarity, patch.hunks, patch.old_hash) == (FileStatus.RENAMED, 100, [], None)


def test_a_copy_round_trips(repo: GitRepo) -> None:
    body = "".join(f"row {i}\n" for i in range(20))
    repo.write("orig.py", body)
    repo.commit()
    repo.write("orig.py", body + "tail\n")
    repo.write("copy.py", body)
    patches = round_trip(repo.diff("-C", "-C"))
    [copy] = [p for p in patches if p.status is FileStatus.COPIED]
    assert (copy.old_path, copy.new_path) == ("orig.py", "copy.py")


def test_a_mode_change_round_trips(repo: GitRepo) -> None:
    repo.write("run.sh", "echo hi\n")
    repo.write("tool.sh", "echo a\n")
    repo.commit()
    (repo.root / "run.sh").chmod(0o755)
    (repo.root / "tool.sh").chmod(0o755)
    repo.write("tool.sh", "echo b\n")
    patches = round_trip(repo.diff())
    by_path = {p.path: p for p in patches}
    assert (by_path["run.sh"].old_mode, by_path["run.sh"].new_mode, by_path["run.sh"].hunks) == ("100644", "100755", [])
    assert by_path["tool.sh"].new_mode == "100755" and len(by_path["tool.sh"].hunks) == 1


def test_symlinks_round_trip_and_are_flagged(repo: GitRepo) -> None:
    os.symlink("target-a", repo.root / "link")
    repo.write("file", "x\n")
    repo.commit()
    (repo.root / "link").unlink()
    os.symlink("target-b", repo.root / "link")
    os.symlink("../outside", repo.root / "new-link")
    patches = round_trip(repo.diff())
    by_path = {p.path: p for p in patches}
    assert by_path["link"].symlink and by_path["link"].old_mode == "120000"
    assert by_path["link"].added_lines() == [(1, "target-b")]
    assert by_path["new-link"].symlink and by_path["new-link"].status is FileStatus.ADDED
    assert by_path["new-link"].added_lines() == [(1, "../outside")]


def test_a_symlink_replacing_a_file_round_trips(repo: GitRepo) -> None:
    repo.write("thing", "plain\n")
    repo.commit()
    (repo.root / "thing").unlink()
    os.symlink("elsewhere", repo.root / "thing")
    patches = round_trip(repo.diff())
    assert [p.status for p in patches] == [FileStatus.DELETED, FileStatus.ADDED]
    assert patches[1].symlink and not patches[0].symlink


def test_a_git_binary_patch_round_trips_and_applies(repo: GitRepo, tmp_path: Path) -> None:
    repo.write("img.png", PNG)
    repo.write("gone.bin", b"\x00\x01\x02")
    repo.commit()
    repo.write("img.png", PNG[::-1])
    (repo.root / "gone.bin").unlink()
    repo.write("new.bin", b"\x00new")
    text = repo.diff("--binary", "--full-index")
    patches = round_trip(text)
    assert all(p.binary and len(p.binary_hunks) == 2 for p in patches)
    img = next(p for p in patches if p.path == "img.png")
    assert img.binary_hunks[0].method in ("literal", "delta") and len(img.old_hash or "") == 40
    applied = repo.apply_to_base(render(patches), tmp_path / "applied")
    assert snapshot(applied) == snapshot(repo.root)


def test_binary_files_differ_round_trips(repo: GitRepo) -> None:
    repo.write("img.png", PNG)
    repo.commit()
    repo.write("img.png", PNG[::-1])
    repo.write("added.bin", b"\x00\x00")
    patches = round_trip(repo.diff())
    assert all(p.binary and not p.binary_hunks for p in patches)
    assert "Binary files /dev/null and b/added.bin differ" in render(patches)


def test_names_with_spaces_round_trip_with_gits_trailing_tab(repo: GitRepo) -> None:
    repo.write("dir with space/a b.txt", "x\n")
    repo.commit()
    repo.write("dir with space/a b.txt", "y\n")
    repo.write("new b.txt", "z\n")
    patches = round_trip(repo.diff())
    assert {p.path for p in patches} == {"dir with space/a b.txt", "new b.txt"}


@pytest.mark.parametrize("quote_path", [True, False])
def test_quoted_names_round_trip_whether_or_not_git_quotes_non_ascii(repo: GitRepo, quote_path: bool) -> None:
    repo.write("keep", "k\n")
    repo.commit()
    names = ["tab\there.txt", 'quote"d.txt', "back\\slash.txt", "café.txt", "new\nline.txt"]
    for name in names:
        repo.write(name, "x\n")
    repo.git("add", "-A")
    text = repo.git("-c", f"core.quotePath={str(quote_path).lower()}", "diff", "--cached", "HEAD")
    assert '"b/tab\\there.txt"' in text
    patches = round_trip(text, quote_non_ascii=quote_path)
    assert sorted(p.path for p in patches) == sorted(names)


def test_a_rename_between_quoted_and_plain_names_round_trips(repo: GitRepo) -> None:
    repo.write("plain.txt", "same\n")
    repo.commit()
    os.rename(repo.root / "plain.txt", repo.root / "odd\tname.txt")
    [patch] = round_trip(repo.diff("-M"))
    assert (patch.old_path, patch.new_path) == ("plain.txt", "odd\tname.txt")


def test_many_files_with_crlf_and_form_feeds_round_trip(repo: GitRepo) -> None:
    repo.write("win.txt", "a\r\nb\r\n")
    repo.write("ff.py", "x = 1\n\x0c\ny = 2\n")
    repo.commit()
    repo.write("win.txt", "a\r\nB\r\n")
    repo.write("ff.py", "x = 1\n\x0c\ny = 3\n")
    patches = round_trip(repo.diff())
    assert patches[1].removed_lines() == [(2, "b\r")]
    assert patches[0].hunks[0].lines[1].text == "\x0c"


def test_a_commit_message_and_signature_around_the_diff_are_skipped(repo: GitRepo) -> None:
    repo.write("a.txt", "one\n-- \ntwo\n")
    repo.commit()
    repo.write("a.txt", "one\ntwo\n")
    repo.git("commit", "-qam", "drop the separator")
    mail = repo.git("format-patch", "--stdout", "-1", "HEAD")
    assert "\n--- \n" in mail and "\n-- \n" in mail  # a removed "-- " line, and the mail's signature
    [patch] = parse(mail)
    # "--- " is a removed line here, not a file header: the hunk's counts say so.
    assert patch.removed_lines() == [(2, "-- ")]
    assert render(patch) == patch.text and patch.text in mail
