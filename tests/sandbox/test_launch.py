"""A command's process is set up by an exec'd program (the built crucible-launch, or setpriv, sh and
prlimit where it cannot be built), not a Python function between fork and exec: its limits, cgroup
and death signal hold whichever way, and the parent's size no longer sets the cost of starting it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox import launcher, process
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


WAYS = ["crucible-launch", "setpriv and prlimit", "python"]


def _only(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if way != "crucible-launch":
        monkeypatch.setattr(launcher, "helper", lambda: None)
    if way == "python":
        monkeypatch.setattr(launcher, "util_linux", lambda: None)


@pytest.mark.parametrize("way", WAYS)
def test_the_limits_hold_whichever_way_the_process_is_set_up(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []
    real = subprocess.Popen

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append((args[0], kwargs))
        return real(*args, **kwargs)

    assert launcher.helper() is not None, "a C compiler is installed here: the helper must build"
    _only(way, monkeypatch)
    monkeypatch.setattr(process.subprocess, "Popen", spy)
    seen = _limits_seen(tmp_path)
    assert seen["Max cpu time"] == "17" and seen["Max open files"] == "123"
    assert seen["Max file size"] == str(3 * 1024 * 1024) and seen["Max processes"] == "77"
    assert seen["Max core file size"] == "0" and seen["Max address space"] == str(LIMITS.memory_mb * 1024 * 1024)
    argv, kwargs = calls[-1]  # the command, after any probe
    assert (kwargs["preexec_fn"] is None) == (way != "python")
    assert Path(argv[0]).name.startswith({"crucible-launch": "crucible-launch", "setpriv and prlimit": "setpriv",
                                          "python": "cat"}[way])  # fmt: skip


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


@pytest.mark.parametrize("way", WAYS[:2])
def test_a_parent_that_died_before_the_death_signal_was_set_is_noticed(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _only(way, monkeypatch)
    argv = launcher.launch_argv(["true"], LIMITS, (), parent=1)  # as if we were not its parent
    assert argv is not None
    done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    assert done.returncode == 137


@pytest.mark.parametrize("way", WAYS[:2])
def test_a_cgroup_that_cannot_be_joined_stops_the_command_before_it_runs(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _only(way, monkeypatch)
    ran = tmp_path / "ran"
    argv = launcher.launch_argv(["touch", str(ran)], LIMITS, (str(tmp_path / "gone" / "cgroup.procs"),), os.getpid())
    assert argv is not None
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 126 and "cannot join cgroup" in done.stderr and not ran.exists()


def test_without_a_compiler_the_helper_is_not_built_and_util_linux_sets_the_command_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_RUNNER_DIR", str(tmp_path / "runners"))
    which = shutil.which
    monkeypatch.setattr(launcher.shutil, "which", lambda name: None if name in ("cc", "gcc") else which(name))
    launcher.helper.cache_clear()
    try:
        assert launcher.helper() is None and not (tmp_path / "runners").exists()
        argv = launcher.launch_argv(["true"], LIMITS, (), os.getpid())
        assert argv is not None and Path(argv[0]).name == "setpriv"
    finally:
        monkeypatch.undo()
        launcher.helper.cache_clear()


def test_the_helper_is_built_once_per_source_and_refuses_what_it_does_not_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_RUNNER_DIR", str(tmp_path))
    launcher.helper.cache_clear()
    try:
        built = launcher.helper()
        assert built is not None and [p.name for p in tmp_path.iterdir()] == [Path(built).name]  # no staging left
        done = subprocess.run([built, str(os.getpid()), "--bogus", "--", "true"], capture_output=True, text=True)
        assert done.returncode == 126 and "unknown option --bogus" in done.stderr
        done = subprocess.run([built, str(os.getpid()), "--", "/nonexistent"], capture_output=True, text=True)
        assert done.returncode == 127 and "cannot execute /nonexistent" in done.stderr
    finally:
        monkeypatch.undo()
        launcher.helper.cache_clear()


def test_an_old_setpriv_without_pdeathsig_means_the_python_set_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    old = bin_dir / "setpriv"
    old.write_text("#!/bin/sh\necho \"setpriv: unrecognized option '--pdeathsig'\" >&2\nexit 1\n")
    old.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(launcher, "helper", lambda: None)
    launcher.util_linux.cache_clear()
    try:
        assert launcher.util_linux() is None
        assert launcher.launch_argv(["true"], LIMITS, (), os.getpid()) is None
        work = tmp_path / "work"
        work.mkdir()
        assert _limits_seen(work)["Max open files"] == "123"  # the fallback still limits
    finally:
        monkeypatch.undo()
        launcher.util_linux.cache_clear()
