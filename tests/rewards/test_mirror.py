"""The candidate's patch is applied once; the other two runs' copies are mirrored from it. The mirror
must leave exactly what applying the patch again would: modified, added, deleted, renamed files,
modes and links — and refuse to write through a link the patch planted."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from rewards.workspaces import mirror
from sandbox import Sandbox
from sandbox.backends.local import LocalBackend


def _tree(root: Path) -> dict[str, tuple[str, str | int]]:
    out: dict[str, tuple[str, str | int]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if ".git" in path.parts:
            continue
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            out[rel] = (path.read_text(), stat.S_IMODE(path.stat().st_mode) & 0o111)
        else:
            out[rel] = ("dir", 0)
    return out


def test_a_mirrored_copy_is_what_applying_the_patch_again_leaves(tmp_path: Path) -> None:
    base = tmp_path / "base"
    (base / "pkg" / "old").mkdir(parents=True)
    (base / "pkg" / "mod.py").write_text("x = 1\n")
    (base / "pkg" / "gone.py").write_text("y = 2\n")
    (base / "pkg" / "old" / "only.py").write_text("z = 3\n")
    (base / "pkg" / "moved.py").write_text("w = 4\n" * 20)
    with Sandbox(base, LocalBackend(allow_unsafe=True)) as box:
        box.write_file("pkg/mod.py", "x = 2\n")
        (box.workspace / "pkg" / "gone.py").unlink()
        shutil.rmtree(box.workspace / "pkg" / "old")
        (box.workspace / "pkg" / "moved.py").rename(box.workspace / "pkg" / "renamed.py")
        box.write_file("bin/tool", "#!/bin/sh\necho hi\n")
        (box.workspace / "bin" / "tool").chmod(0o755)
        os.symlink("../pkg/mod.py", box.workspace / "bin" / "mod-link")
        patch = box.diff()
    with (
        Sandbox(base, LocalBackend(allow_unsafe=True)) as applied,
        Sandbox(base, LocalBackend(allow_unsafe=True)) as mirrored,
    ):
        applied.apply_patch(patch)
        paths = [
            "bin/mod-link",
            "bin/tool",
            "pkg/gone.py",
            "pkg/mod.py",
            "pkg/moved.py",
            "pkg/old/only.py",
            "pkg/renamed.py",
        ]
        assert mirror(applied.workspace, mirrored.workspace, paths)
        assert _tree(mirrored.workspace) == _tree(applied.workspace)
        assert "pkg/old" not in _tree(mirrored.workspace)


def test_the_mirror_refuses_to_write_through_a_link(tmp_path: Path) -> None:
    source, target, outside = tmp_path / "source", tmp_path / "target", tmp_path / "outside"
    for folder in (source, target, outside):
        folder.mkdir()
    (source / "a").mkdir()
    (source / "a" / "b.py").write_text("b = 1\n")
    os.symlink(outside, target / "a")  # the target tree has a link where the source has a folder
    assert not mirror(source, target, ["a/b.py"])
    assert not (outside / "b.py").exists()
