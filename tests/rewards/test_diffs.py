"""Sorting an agent's file patches: kept for scoring, new tests set aside, protected paths refused."""

from __future__ import annotations

from patches import parse, text_patch
from rewards.diffs import classify

BASE_FILES = {"pkg/mod.py", "tests/test_mod.py", "conftest.py"}


def _patch(path: str, before: str | None = "a\n", after: str | None = "b\n") -> str:
    built = text_patch(path, before, after)
    assert built is not None
    return built.text


def test_it_keeps_code_sets_new_tests_aside_and_refuses_protected_paths() -> None:
    text = (
        _patch("pkg/mod.py")
        + _patch("tests/test_new.py", None)
        + _patch("tests/test_mod.py", after=None)
        + _patch("conftest.py")
        + _patch("pkg/sitecustomize.py", None)
    )
    result = classify(parse(text), "tests", BASE_FILES)
    assert [p.path for p in result.kept] == ["pkg/mod.py"]
    assert [p.path for p in result.new_tests] == ["tests/test_new.py"]
    assert [(p.path, why) for p, why in result.protected] == [
        ("tests/test_mod.py", "existing test file"),
        ("conftest.py", "conftest.py changes how tests run"),
        ("pkg/sitecustomize.py", "interpreter start-up hook"),
    ]


def test_a_quoted_name_cannot_hide_a_path_outside_the_repository() -> None:
    text = (
        'diff --git "a/pkg/\\056\\056/\\056\\056/x.py" "b/pkg/\\056\\056/\\056\\056/x.py"\nnew file mode 100644\n'
        '--- /dev/null\n+++ "b/pkg/\\056\\056/\\056\\056/x.py"\n@@ -0,0 +1 @@\n+x\n'
    )
    result = classify(parse(text), "tests", BASE_FILES)
    assert [(p.path, why) for p, why in result.protected] == [("pkg/../../x.py", "path outside the repository")]


def test_a_rename_is_refused_when_either_side_is_protected() -> None:
    text = (
        "diff --git a/tests/test_mod.py b/pkg/moved.py\nsimilarity index 100%\nrename from tests/test_mod.py\n"
        "rename to pkg/moved.py\n"
    )
    result = classify(parse(text), "tests", BASE_FILES)
    assert [why for _, why in result.protected] == ["existing test file"] and not result.kept


def test_the_kept_text_is_the_agents_own_text_for_git_to_apply() -> None:
    sloppy = "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,9 +1,9 @@\n-a\n+b"
    result = classify(parse(sloppy, recount=True), "tests", BASE_FILES)
    assert result.kept_text() == sloppy + "\n"
