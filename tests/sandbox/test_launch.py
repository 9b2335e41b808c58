"""A command's process is set up by exec'd programs (setpriv, sh, prlimit), not a Python function
between fork and exec: its limits, cgroup and death signal hold either way, and the parent's size
no longer sets the cost of starting it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox import process
from sandbox.limits import Limits
from sandbox.process import run_process

LIMITS = Limits(wall_seconds=20, cpu_seconds=17, open_files=123, file_size_mb=3, pids=77)


def _limits_seen(tmp_path: Path) -> dict[str, str]:
    result = run_process(["cat", "/proc/self/limits"], cwd=tmp_path, env={"PATH": os.environ["PATH"]},
                         limits=LIMITS, workspace=tmp_path)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    rows = {}
    for line in result.stdout.splitlines()[1:]:
        name, soft = line[:26].strip(), line[26:].split()[0]
        rows[name] = soft
    return rows


@pytest.mark.parametrize("launchers", ["exec'd programs", "python fallback"])
def test_the_limits_hold_whichever_way_the_process_is_set_up(
    launchers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    real = subprocess.Popen

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(process.subprocess, "Popen", spy)
    if launchers == "python fallback":
        monkeypatch.setattr(process, "_launchers", lambda: None)
    seen = _limits_seen(tmp_path)
    assert seen["Max cpu time"] == "17" and seen["Max open files"] == "123"
    assert seen["Max file size"] == str(3 * 1024 * 1024) and seen["Max processes"] == "77"
    assert seen["Max core file size"] == "0" and seen["Max address space"] == str(LIMITS.memory_mb * 1024 * 1024)
    assert (calls[-1]["preexec_fn"] is None) == (launchers == "exec'd programs")  # the command, after any probe


def test_a_command_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    starter = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from sandbox.limits import Limits\n"
        "from sandbox.process import run_process\n"
        f"run_process(['sh', '-c', 'echo $$ > {marker}; exec sleep 60'], cwd=Path('{tmp_path}'),\n"
        "            env={'PATH': os.environ['PATH']}, limits=Limits(wall_seconds=60), workspace=Path('{tmp_path}'))\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", starter], cwd=Path(__file__).resolve().parents[2])
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(marker.read_text())
    os.kill(parent.pid, signal.SIGKILL)  # no clean-up runs: only the death signal can stop the command
    parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
        if state == "Z":
            break
        time.sleep(0.05)
    alive = Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    assert not alive, f"the command {pid} outlived the process that started it"


def test_a_parent_that_died_before_the_death_signal_was_set_is_noticed(tmp_path: Path) -> None:
    argv = process.launch_argv(["true"], LIMITS, (), parent=1)  # as if we were not its parent
    assert argv is not None
    done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    assert done.returncode == 137


def test_an_old_setpriv_without_pdeathsig_means_the_python_set_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    old = bin_dir / "setpriv"
    old.write_text("#!/bin/sh\necho \"setpriv: unrecognized option '--pdeathsig'\" >&2\nexit 1\n")
    old.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    process._launchers.cache_clear()
    try:
        assert process._launchers() is None
        assert process.launch_argv(["true"], LIMITS, (), os.getpid()) is None
        work = tmp_path / "work"
        work.mkdir()
        assert _limits_seen(work)["Max open files"] == "123"  # the fallback still limits
    finally:
        monkeypatch.undo()
        process._launchers.cache_clear()
