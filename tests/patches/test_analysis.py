"""What a patch touches: paths, base lines, and the Python functions whose lines it changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from patches import PatchError, changed_functions, is_test_path, parse, text_patch, touched_base_lines, touched_paths
from tests.patches.conftest import GitRepo

MODULE = '''\
def outer(x):
    def inner(y):
        return y + 1
    return inner(x)


async def fetch(url):
    """Get it."""
    return url


def untouched():
    return 0
'''


def test_it_names_the_outermost_functions_a_patch_changes(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(MODULE)
    after = MODULE.replace("return y + 1", "return y + 2").replace("return url", "return url.strip()")
    patch = text_patch("pkg/mod.py", MODULE, after)
    assert patch is not None
    found = changed_functions(tmp_path, patch.text)
    assert {path: [f.name for f in funcs] for path, funcs in found.items()} == {"pkg/mod.py": ["outer", "fetch"]}
    assert changed_functions(tmp_path, [patch]).keys() == found.keys()


def test_it_skips_new_files_non_python_files_and_paths_outside_the_base(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("a\n")
    (tmp_path.parent / "outside.py").write_text(MODULE)
    text = "".join(
        p.text
        for p in (
            text_patch("new.py", None, "def f():\n    pass\n"),
            text_patch("notes.txt", "a\n", "b\n"),
            text_patch("../outside.py", MODULE, MODULE.replace("return 0", "return 1")),
        )
        if p is not None
    )
    assert changed_functions(tmp_path, text) == {}


def test_an_unreadable_patch_is_a_patch_error(tmp_path: Path) -> None:
    with pytest.raises(PatchError):
        changed_functions(tmp_path, "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ nonsense @@\n")


def test_touched_base_lines_count_removals_and_the_line_before_an_insertion(repo: GitRepo) -> None:
    base = "".join(f"line {i}\n" for i in range(1, 21))
    repo.write("n.txt", base)
    repo.commit()
    repo.write(
        "n.txt", base.replace("line 4\n", "").replace("line 15\n", "line 15\nnew\n").replace("line 1\n", "one\n")
    )
    [patch] = parse(repo.diff())
    assert touched_base_lines(patch) == {1, 4, 15}


def test_touched_paths_list_both_sides_of_a_rename_once(repo: GitRepo) -> None:
    repo.write("a.txt", "".join(f"{i}\n" for i in range(20)))
    repo.write("b.txt", "b\n")
    repo.commit()
    (repo.root / "a.txt").rename(repo.root / "c.txt")
    repo.write("b.txt", "B\n")
    paths = touched_paths(parse(repo.diff("-M")) * 2)
    assert sorted(paths) == ["a.txt", "b.txt", "c.txt"] and paths.index("a.txt") + 1 == paths.index("c.txt")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_x.py", True),
        ("test_x.py", True),
        ("pkg/x_test.py", True),
        ("pkg/testing/helpers.py", True),
        ("suite/check.py", True),
        ("pkg/x.py", False),
        ("pkg/contest.py", False),
        ("tests.py", False),
        ("pkg/test_data.json", False),
    ],
)
def test_test_paths_are_known_by_name_folder_or_the_tasks_tests_directory(path: str, expected: bool) -> None:
    assert is_test_path(path, "suite") is expected
