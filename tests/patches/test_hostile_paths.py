"""Paths are reported as git would apply them, so the layers above can refuse the dangerous ones."""

from __future__ import annotations

import pytest

from patches import parse, render
from patches.paths import quote, unquote


def test_a_path_climbing_out_of_the_repository_is_reported_as_written() -> None:
    text = (
        "diff --git a/../evil.txt b/../evil.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../evil.txt\n"
        "@@ -0,0 +1 @@\n+pwned\n"
    )
    [patch] = parse(text)
    assert patch.path == "../evil.txt" and patch.paths == ("../evil.txt",)


def test_an_absolute_path_in_a_plain_diff_is_reported_as_written() -> None:
    [patch] = parse("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-root\n+toor\n")
    assert (patch.old_path, patch.new_path) == ("/etc/passwd", "/etc/passwd")


def test_octal_escapes_cannot_hide_a_climb_out_of_the_repository() -> None:
    # "\056\056" is "..": read naively, the quoted name would look like a harmless file.
    text = (
        'diff --git "a/\\056\\056/x.py" "b/\\056\\056/x.py"\nnew file mode 100644\n--- /dev/null\n'
        '+++ "b/\\056\\056/x.py"\n@@ -0,0 +1 @@\n+x\n'
    )
    [patch] = parse(text)
    assert patch.path == "../x.py"


def test_a_rename_line_cannot_smuggle_a_second_path() -> None:
    text = 'diff --git a/ok.py b/ok2.py\nsimilarity index 100%\nrename from ok.py\nrename to "x\\n/../../etc/cron"\n'
    [patch] = parse(text)
    assert patch.paths == ("ok.py", "x\n/../../etc/cron")


@pytest.mark.parametrize(
    "name", ["plain.txt", "sp ace", "tab\t", 'q"uote', "back\\slash", "new\nline", "\x7f", "café", "\udcff-not-utf8"]
)
def test_any_name_survives_quoting_and_unquoting(name: str) -> None:
    quoted = quote("b/" + name)
    assert (unquote(quoted)[0] if quoted.startswith('"') else quoted) == "b/" + name
    text = render(parse(f"--- /dev/null\n+++ {quoted}\n@@ -0,0 +1 @@\n+x\n"))
    assert parse(text)[0].path == name
