"""Property: reading a task directory never reads anything outside it, whatever links it holds.

Random trees: a valid task skeleton plus random files, folders, FIFOs and links (to a host
folder of secrets, to a secret file, within the tree, dangling), any of which may also take
the place of task.md, metadata.json, expected_patch, repo_snapshot/ or tests/. A tree with a
link or a FIFO anywhere is refused by name; no secret ever shows up in what is read.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasks.taskdir import TaskDirError, read_task_dir

SECRET = "host-secret-5b1e"
NAMES = st.sampled_from(["a", "b", "c.py", "task.md", "metadata.json", "expected_patch", "repo_snapshot", "tests"])
FOLDERS = st.sampled_from(["", "repo_snapshot", "tests", "repo_snapshot/pkg", "tests/sub", "extra"])
KINDS = st.sampled_from(["file", "folder", "fifo", "link_secret_dir", "link_secret_file", "link_inside", "dangling"])
ENTRIES = st.lists(st.tuples(FOLDERS, NAMES, KINDS), max_size=6)


def skeleton(root: Path) -> None:
    (root / "repo_snapshot" / "pkg").mkdir(parents=True)
    (root / "repo_snapshot" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "tests" / "sub").mkdir(parents=True)
    (root / "tests" / "test_mod.py").write_text("def test_x():\n    pass\n")
    (root / "task.md").write_text("Fix it.\n")
    (root / "metadata.json").write_text(json.dumps({"task_id": "t1"}))
    (root / "expected_patch").write_text("")


def plant(root: Path, secrets: Path, folder: str, name: str, kind: str) -> bool:
    """Put one entry in the tree (replacing what is there); True when it is a link or a FIFO."""
    parent = root / folder
    if not parent.is_dir() or parent.is_symlink():
        return False
    path = parent / name
    if path.is_symlink() or path.is_file() or path.is_fifo():
        path.unlink()
    elif path.is_dir():
        return False  # keep it simple: only replace files and empty spots
    targets = {
        "link_secret_dir": secrets,
        "link_secret_file": secrets / "secret_key",
        "link_inside": root / "task.md",
        "dangling": root / "nowhere",
    }
    if kind == "file":
        path.write_text(f"plain {name}\n")
    elif kind == "folder":
        path.mkdir()
        (path / "inner.txt").write_text("inner\n")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(targets[kind])
    return kind not in ("file", "folder")


def hostile_entries(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink() or path.is_fifo():
                found.append(path.relative_to(root).as_posix())
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ENTRIES)
def test_reading_a_task_dir_never_reads_outside_it(entries: list[tuple[str, str, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        secrets, root = Path(tmp) / "host", Path(tmp) / "task"
        secrets.mkdir()
        (secrets / "secret_key").write_text(SECRET)
        (secrets / "test_secret.py").write_text(f"S = {SECRET!r}\n")
        (secrets / "task.md").write_text(SECRET)
        (secrets / "metadata.json").write_text(json.dumps({"task_id": "t1", "repo": SECRET}))
        root.mkdir()
        skeleton(root)
        for folder, name, kind in entries:
            plant(root, secrets, folder, name, kind)
        hostile = hostile_entries(root)
        try:
            task = read_task_dir(root)
        except TaskDirError as exc:
            assert SECRET not in str(exc)
            if hostile:
                assert any(f"{rel}: " in str(exc) for rel in hostile), (str(exc), hostile)
            return
        assert not hostile, f"read a tree holding {hostile}"
        assert SECRET not in task.statement + task.expected_patch + json.dumps(task.metadata)
        for tree, manifest in (("repo_snapshot", task.snapshot_files), ("tests", task.tests_files)):
            assert [f[0] for f in manifest] == regular_files(root / tree)


def regular_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and not p.is_symlink())
