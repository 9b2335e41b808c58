from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sandbox import Sandbox, SandboxError, reap_orphans
from sandbox.backends.bwrap import BwrapBackend
from sandbox.core import sandboxes_root


def processes_with(marker: str) -> list[int]:
    """Host processes running `marker` as their command line (not scripts that mention it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            if cmdline == marker:
                found.append(int(entry.name))
    return found


def test_close_removes_the_workspace_and_refuses_further_use(repo: Path) -> None:
    box = Sandbox(repo, BwrapBackend())
    root = box.root
    assert (root / "workspace" / "configkit").is_dir()
    box.close()
    assert not root.exists()
    with pytest.raises(SandboxError, match="closed"):
        box.exec("true")


def test_an_exception_inside_the_block_still_cleans_up(repo: Path) -> None:
    with pytest.raises(RuntimeError), Sandbox(repo, BwrapBackend()) as box:
        root = box.root
        raise RuntimeError("agent crashed")
    assert not root.exists()


def test_a_background_process_does_not_outlive_its_command(box: Sandbox) -> None:
    result = box.exec("sleep 876501 & echo started")
    assert result.stdout == "started\n" and result.exit_code == 0
    time.sleep(0.2)
    assert processes_with("sleep 876501") == []


def test_killing_the_parent_kills_the_sandbox_and_the_next_start_reaps_its_dir(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sandboxes root of this test's own (the parent inherits it): in the shared one, another xdist
    # worker's sandbox start reaps the dead parent's directory before this test looks at it.
    monkeypatch.setenv("CRUCIBLE_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    script = textwrap.dedent(f"""
        import sys, time
        from sandbox import Sandbox
        box = Sandbox({str(repo)!r}, "bwrap")
        print(box.root, flush=True)
        box.exec("sleep 876502", timeout=600)
    """)
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2]
    )
    assert parent.stdout is not None
    root = Path(parent.stdout.readline().strip())
    deadline = time.monotonic() + 10
    while not processes_with("sleep 876502") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with("sleep 876502"), "the sandboxed command should be running"
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while processes_with("sleep 876502") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with("sleep 876502") == []
    assert root.exists() and root.parent == sandboxes_root()
    assert reap_orphans() >= 1
    assert not root.exists()


def test_a_missing_base_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a directory"):
        Sandbox(tmp_path / "nope", BwrapBackend())


def test_the_sandboxes_root_is_private_and_refused_when_someone_else_controls_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_SANDBOX_DIR", str(tmp_path))
    root = tmp_path / f"crucible-sandboxes-{os.getuid()}"

    root.mkdir(mode=0o777)
    root.chmod(0o777)  # as a careless earlier version (or another user's umask) left it
    assert sandboxes_root() == root
    assert stat.S_IMODE(root.stat().st_mode) == 0o700

    root.rmdir()
    elsewhere = tmp_path / "attacker-controlled"
    elsewhere.mkdir()
    root.symlink_to(elsewhere)  # planted before we first ran
    with pytest.raises(SandboxError, match="not a plain directory"):
        sandboxes_root()

    root.unlink()
    root.mkdir()
    if os.geteuid() == 0:
        os.chown(root, os.getuid() + 4242, -1)  # made by another local user
    else:
        real_lstat = Path.lstat

        def owned_by_someone_else(self: Path) -> os.stat_result:
            info = real_lstat(self)
            if self != root:
                return info
            fields = list(info)
            fields[stat.ST_UID] = os.getuid() + 4242
            return os.stat_result(fields)

        monkeypatch.setattr(Path, "lstat", owned_by_someone_else)
    with pytest.raises(SandboxError, match="belongs to uid"):
        sandboxes_root()
