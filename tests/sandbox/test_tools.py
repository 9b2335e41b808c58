from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sandbox import Sandbox, ToolError
from tests.sandbox.conftest import DEMO_TASK


def test_it_reads_writes_and_edits_files_in_the_workspace(box: Sandbox) -> None:
    assert "def parse_config" in box.read_file("configkit/config.py")
    box.write_file("notes/todo.txt", "fix parse_config\n")
    assert (box.workspace / "notes" / "todo.txt").read_text() == "fix parse_config\n"
    assert "line 1" in box.edit_file("notes/todo.txt", "fix", "fixed")
    assert box.read_file("/workspace/notes/todo.txt") == "fixed parse_config\n"


def test_an_edit_must_match_exactly_once(box: Sandbox) -> None:
    box.write_file("a.py", "x = 1\nx = 1\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        box.edit_file("a.py", "x = 1", "x = 2")
    with pytest.raises(ToolError, match="not found"):
        box.edit_file("a.py", "y = 1", "y = 2")
    assert box.read_file("a.py") == "x = 1\nx = 1\n"


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "configkit/../../x", "", "a\x00b"])
def test_paths_that_leave_the_workspace_are_refused(box: Sandbox, path: str) -> None:
    with pytest.raises(ToolError):
        box.read_file(path)
    with pytest.raises(ToolError):
        box.write_file(path, "x")


def test_symlinks_pointing_out_of_the_workspace_are_refused(box: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN")
    os.symlink(secret, box.workspace / "link.txt")
    os.symlink(tmp_path, box.workspace / "linkdir")
    with pytest.raises(ToolError, match="outside the workspace"):
        box.read_file("link.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        box.write_file("linkdir/new.txt", "x")
    with pytest.raises(ToolError, match="outside the workspace"):
        box.edit_file("link.txt", "TOKEN", "stolen")
    assert secret.read_text() == "TOKEN" and not (tmp_path / "new.txt").exists()


def test_search_finds_text_and_symbols(box: Sandbox) -> None:
    hits = box.search("def parse_config")
    assert [(h.path, h.text) for h in hits] == [
        ("configkit/config.py", "def parse_config(text: str) -> dict[str, Any]:")
    ]
    assert str(hits[0]) == f"configkit/config.py:{hits[0].line}: def parse_config(text: str) -> dict[str, Any]:"
    symbols = box.search_symbol("parse_config")
    assert any(s.path == "configkit/config.py" and s.text == "def parse_config" for s in symbols)
    with pytest.raises(ToolError, match="regular expression"):
        box.search("(", regex=True)
    with pytest.raises(ToolError):
        box.search_symbol("not a name!")


def test_diff_shows_edits_new_deleted_binary_and_mode_changes(box: Sandbox) -> None:
    assert box.diff() == ""
    box.edit_file("configkit/config.py", "def parse_config(text: str)", "def parse_config(text: str)  # edited")
    box.write_file("NEW.md", "hello\n")
    (box.workspace / "README.md").unlink()
    (box.workspace / "blob.bin").write_bytes(bytes(range(256)))
    (box.workspace / "LICENSE").chmod(0o755)
    (box.workspace / "configkit" / "__pycache__").mkdir(exist_ok=True)
    (box.workspace / "configkit" / "__pycache__" / "x.pyc").write_bytes(b"\x00cache")
    patch = box.diff()
    assert (
        "diff --git a/configkit/config.py b/configkit/config.py" in patch
        and "+def parse_config(text: str)  # edited" in patch
    )
    assert "new file mode 100644" in patch and "+++ b/NEW.md" in patch
    assert "deleted file mode" in patch and "--- a/README.md" in patch
    assert "GIT binary patch" in patch
    assert "new mode 100755" in patch
    assert "__pycache__" not in patch


def test_the_expected_patch_applies_and_diff_reproduces_it(box: Sandbox) -> None:
    expected = (DEMO_TASK / "expected_patch").read_text()
    assert box.apply_patch(expected) == "patch applied to 1 file(s): configkit/config.py"
    replay = subprocess.run(
        ["git", "apply", "--check", "-"],
        input=box.diff().encode(),
        cwd=DEMO_TASK / "repo_snapshot",
        capture_output=True,
    )
    assert replay.returncode == 0, replay.stderr
    with pytest.raises(ToolError, match="git apply failed"):
        box.apply_patch(expected)  # already applied
    with pytest.raises(ToolError, match="empty"):
        box.apply_patch("   ")


def test_a_patch_cannot_write_outside_the_workspace(box: Sandbox, tmp_path: Path) -> None:
    evil = (
        "diff --git a/../evil.txt b/../evil.txt\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/../evil.txt\n@@ -0,0 +1 @@\n+pwned\n"
    )
    with pytest.raises(ToolError):
        box.apply_patch(evil)
    assert not (box.root / "evil.txt").exists()


def test_git_config_planted_in_the_workspace_never_runs_on_the_host(box: Sandbox, tmp_path: Path) -> None:
    marker = tmp_path / "host-was-touched"
    git_dir = box.workspace / ".git"
    git_dir.mkdir()
    (git_dir / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = hooks\n")
    (box.workspace / ".gitattributes").write_text("* filter=evil\n")
    box.write_file("x.py", "print(1)\n")
    assert "+++ b/x.py" in box.diff()
    assert not marker.exists()


def test_a_workspace_gitignore_cannot_carry_bytecode_into_the_diff(box: Sandbox) -> None:
    # The agent un-ignores bytecode so that Sandbox.diff() itself would ship a forged .pyc.
    box.write_file(".gitignore", "!__pycache__/\n!*.pyc\n")
    box.write_file("configkit/__pycache__/config.cpython-311.pyc", "not really bytecode")
    box.write_file("configkit/stale.pyc", "x")
    headers = [line for line in box.diff().splitlines() if line.startswith("diff --git")]
    assert headers == ["diff --git a/.gitignore b/.gitignore"]
