"""The Docker-API backend against a private Podman service: behaviour, then containment.

Every containment case checks both the clear result the caller gets (exit code,
killed_by, error text) and that the host is as it was.
"""

from __future__ import annotations

import hashlib
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.backends.base import BASE_ENV, SandboxError
from sandbox.backends.docker import BASE_IMAGE, LABEL, DockerBackend
from sandbox.limits import Limits
from tests.sandbox.test_lifecycle import processes_with

REPO = Path(__file__).resolve().parents[2]
SMALL = Limits(
    wall_seconds=20,
    cpu_seconds=20,
    memory_mb=256,
    pids=64,
    file_size_mb=16,
    open_files=256,
    output_bytes=8 * 1024,
    output_hard_bytes=4 * 1024 * 1024,
    workspace_mb=64,
)


@pytest.fixture(autouse=True)
def nothing_is_left(docker_backend: DockerBackend) -> Iterator[None]:
    yield
    assert docker_backend.client.containers.list(all=True) == []
    assert sandbox_user_processes(docker_backend) == []


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    (path / "hello.txt").write_text("hello from the host\n")
    return path


def sandbox_user_processes(backend: DockerBackend) -> list[int]:
    """Host pids running as the sandbox uid in a container of this session's podman service.

    None may exist once a call has returned. Other test processes run their own podman
    services at the same time, with their own uid-65534 sandboxes, so a pid counts only when
    its cgroup names a container that our service created, or names no container at all (a
    process that escaped its container's cgroup is a leak whoever made it).
    """
    ours = _containers_created_by(backend)
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
                cgroup = (entry / "cgroup").read_text()
                uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if uid_line.split()[1] != "65534":
                continue
            container = re.search(r"libpod-([0-9a-f]{64})", cgroup)
            if container is None or container.group(1) in ours:
                found.append(int(entry.name))
    return found


def _containers_created_by(backend: DockerBackend) -> set[str]:
    events = backend.client.events(
        since=1, until=int(time.time()) + 1, decode=True, filters={"type": "container", "event": "create"}
    )
    return {event.get("id") or event["Actor"]["ID"] for event in events}


def host_still_works() -> bool:
    return subprocess.run(["true"], check=False).returncode == 0


# behaviour -------------------------------------------------------------------


def test_the_leak_check_sees_a_process_in_one_of_our_containers(docker_backend: DockerBackend, workspace: Path) -> None:
    # The check every test ends with must be able to fail: while a sandbox runs, it counts it.
    seen: list[int] = []
    runner = threading.Thread(target=docker_backend.run, args=(["sleep", "6"], workspace, SMALL))
    runner.start()
    deadline = time.monotonic() + 30
    while not seen and runner.is_alive() and time.monotonic() < deadline:
        seen = sandbox_user_processes(docker_backend)
        time.sleep(0.2)
    runner.join()
    assert seen, "a running sandbox's process was not counted"


def test_it_runs_true_in_a_fresh_container(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(["true"], workspace, SMALL)
    assert result.exit_code == 0 and not result.timed_out and result.killed_by is None
    assert 0 < result.startup_ms <= result.duration_ms


def test_it_captures_stdout_and_stderr_separately(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(["sh", "-c", "echo out; echo err >&2; echo more"], workspace, SMALL)
    assert result.stdout == "out\nmore\n" and result.stderr == "err\n"
    assert (result.stdout_bytes, result.stderr_bytes) == (9, 4) and not result.truncated


def test_it_reports_the_commands_exit_code(docker_backend: DockerBackend, workspace: Path) -> None:
    assert docker_backend.run(["sh", "-c", "exit 3"], workspace, SMALL).exit_code == 3
    assert docker_backend.run(["false"], workspace, SMALL).exit_code == 1
    missing = docker_backend.run(["sh", "-c", "no-such-command"], workspace, SMALL)
    assert missing.exit_code == 127 and "not found" in missing.stderr


def test_it_runs_the_runtime_python_with_pytest(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(
        ["python", "-c", "import pytest, sys; print(pytest.__name__, sys.prefix)"], workspace, SMALL
    )
    assert result.exit_code == 0, result.stderr
    # The runtime's python is the runner venv (pytest only), never Crucible's own environment.
    assert result.stdout.split() == ["pytest", str(Path(docker_backend.runtime.python).parent.parent)]


def test_it_runs_as_nobody_with_no_capabilities(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(
        ["sh", "-c", "id -u; id -g; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status"], workspace, SMALL
    )
    lines = result.stdout.split("\n")
    assert lines[:2] == ["65534", "65534"]
    assert "CapEff:\t0000000000000000" in lines and "CapPrm:\t0000000000000000" in lines
    assert "NoNewPrivs:\t1" in lines


def test_it_passes_only_the_base_environment_and_the_given_env(
    docker_backend: DockerBackend, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_HOST_SECRET", "AKIA-HOST-ENV")
    result = docker_backend.run(["env"], workspace, SMALL, env={"TASK_ID": "task_0001"})
    env = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert "AKIA" not in result.stdout
    assert env["TASK_ID"] == "task_0001" and env["PATH"] == docker_backend.runtime.path
    for key in set(BASE_ENV) - {"PATH"}:
        assert env[key] == BASE_ENV[key]


def test_it_feeds_stdin_to_the_command(docker_backend: DockerBackend, workspace: Path) -> None:
    data = os.urandom(1024 * 1024)
    script = "import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
    result = docker_backend.run(["python", "-c", script], workspace, SMALL, stdin=data)
    assert result.exit_code == 0 and result.stdout.strip() == hashlib.sha256(data).hexdigest()
    assert docker_backend.run(["cat"], workspace, SMALL, stdin=b"").stdout == ""


def test_it_makes_workspace_writes_visible_on_the_host(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(
        ["sh", "-c", "pwd; cat hello.txt; echo changed >> hello.txt; mkdir -p out && echo new > out/made.txt"],
        workspace,
        SMALL,
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "/workspace\nhello from the host\n"
    assert (workspace / "hello.txt").read_text() == "hello from the host\nchanged\n"
    assert (workspace / "out" / "made.txt").read_text() == "new\n"


def test_it_mounts_extra_read_only_and_read_write_binds(
    docker_backend: DockerBackend, workspace: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.txt").write_text("read me")
    reports = tmp_path / "reports"
    reports.mkdir()
    result = docker_backend.run(
        [
            "sh",
            "-c",
            "cat /data/data.txt; echo; echo x > /data/new 2>/dev/null || echo ro; echo report > /run/r/out.xml",
        ],
        workspace,
        SMALL,
        extra_ro_binds=[(shared, "/data")],
        extra_rw_binds=[(reports, "/run/r")],
    )
    assert result.stdout == "read me\nro\n" and result.exit_code == 0
    assert not (shared / "new").exists() and (reports / "out.xml").read_text() == "report\n"


def test_it_kills_a_command_at_the_wall_timeout(docker_backend: DockerBackend, workspace: Path) -> None:
    started = time.monotonic()
    result = docker_backend.run(["sh", "-c", "echo begun; sleep 876501"], workspace, Limits(wall_seconds=1))
    assert result.timed_out and result.killed_by == "wall" and result.exit_code is None
    assert result.stdout == "begun\n"
    assert 1000 <= result.duration_ms and time.monotonic() - started < 10
    assert processes_with("sleep 876501") == []


def test_it_still_times_out_a_command_that_closed_its_output(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(
        ["sh", "-c", "echo bye; exec >&- 2>&-; sleep 876507"], workspace, Limits(wall_seconds=1.5)
    )
    assert result.stdout == "bye\n" and result.killed_by == "wall" and result.exit_code is None
    assert processes_with("sleep 876507") == []
    quiet = docker_backend.run(["sh", "-c", "exec >&- 2>&-; sleep 0.5; exit 4"], workspace, SMALL)
    assert quiet.exit_code == 4 and quiet.killed_by is None


def test_it_creates_its_tiny_base_image_once(docker_backend: DockerBackend) -> None:
    assert docker_backend.ensure_image() == BASE_IMAGE
    image = docker_backend.client.images.get(BASE_IMAGE)
    assert image.attrs["Size"] < 64 * 1024
    fresh = DockerBackend(base_url=docker_backend.base_url)
    try:
        assert fresh.ensure_image() == BASE_IMAGE
        assert fresh.client.images.get(BASE_IMAGE).id == image.id
    finally:
        fresh.close()


def test_it_turns_engine_errors_into_a_sandbox_error(docker_backend: DockerBackend, workspace: Path) -> None:
    missing = DockerBackend(base_url=docker_backend.base_url, image="crucible-no-such-image:0")
    try:
        with pytest.raises(SandboxError, match="docker backend failed"):
            missing.run(["true"], workspace, SMALL)
    finally:
        missing.close()
    with pytest.raises(SandboxError, match="not a directory"):
        docker_backend.run(["true"], workspace / "nope", SMALL)
    with pytest.raises(SandboxError, match="cannot reach"):
        DockerBackend(base_url="unix:///nonexistent/docker.sock")


def test_it_removes_the_container_when_supervision_fails(
    docker_backend: DockerBackend, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(docker_backend, "_supervise", crash)
    with pytest.raises(KeyboardInterrupt):
        docker_backend.run(["sleep", "876502"], workspace, SMALL)
    assert processes_with("sleep 876502") == []


def test_it_reaps_containers_whose_owner_was_killed(docker_backend: DockerBackend, workspace: Path) -> None:
    script = textwrap.dedent(f"""
        from pathlib import Path
        from sandbox.backends.docker import DockerBackend
        from sandbox.limits import Limits
        DockerBackend(base_url={docker_backend.base_url!r}).run(["sleep", "876503"], Path({str(workspace)!r}), Limits())
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=REPO)
    deadline = time.monotonic() + 30
    while not processes_with("sleep 876503") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with("sleep 876503"), "the sandboxed command should be running"
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    assert processes_with("sleep 876503"), "a container outlives its killed owner"
    assert docker_backend.reap_orphans() == 1
    assert processes_with("sleep 876503") == []


# containment -------------------------------------------------------------------

FORK_LOOP = textwrap.dedent("""
    import os, time
    n = 0
    try:
        while True:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            n += 1
    except OSError as exc:
        print(f"forked {n}: {exc.strerror}")
""")


def test_it_caps_a_fork_loop_at_the_pids_limit(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(["python", "-c", FORK_LOOP], workspace, SMALL)
    assert result.exit_code == 0, result.stderr
    forked = int(result.stdout.split()[1].rstrip(":"))
    assert forked < SMALL.pids and "Resource temporarily unavailable" in result.stdout
    assert sandbox_user_processes(docker_backend) == [] and host_still_works()


def test_it_caps_each_sandbox_separately_so_one_cannot_starve_another(
    docker_backend: DockerBackend, tmp_path: Path
) -> None:
    # All sandboxes run as uid 65534; a per-uid cap (RLIMIT_NPROC) would be shared by them.
    hog = (
        "import os, time\nfor _ in range(50):\n    os.fork() or (time.sleep(6), os._exit(0))\n"
        "time.sleep(6)\nprint('hog held 50')"
    )
    results: dict[str, str] = {}

    def run_in(name: str, script: str) -> None:
        (tmp_path / name).mkdir()
        results[name] = docker_backend.run(["python", "-c", script], tmp_path / name, SMALL).stdout

    hog_thread = threading.Thread(target=run_in, args=("hog", hog))
    hog_thread.start()
    time.sleep(0.5)
    run_in("other", "import time; time.sleep(2)\n" + FORK_LOOP)
    hog_thread.join()
    assert results["hog"] == "hog held 50\n"
    forked = int(results["other"].split()[1].rstrip(":"))
    assert SMALL.pids - 3 <= forked < SMALL.pids  # the init and the forking process count too


def test_it_contains_a_shell_fork_bomb(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(
        ["bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep 3"],
        workspace,
        Limits(**{**SMALL.__dict__, "wall_seconds": 8}),
    )
    assert "Resource temporarily unavailable" in result.stderr or result.timed_out
    assert sandbox_user_processes(docker_backend) == [] and host_still_works()


def test_it_kills_a_memory_hog_at_the_memory_limit(docker_backend: DockerBackend, workspace: Path) -> None:
    hog = "chunks = []\nfor _ in range(100):\n    chunks.append(b'x' * 10**8)\nprint('allocated 10 GB')"
    result = docker_backend.run(["python", "-c", hog], workspace, SMALL)
    assert "allocated" not in result.stdout
    assert result.exit_code == 137 or (result.exit_code == 1 and "MemoryError" in result.stderr), result
    assert host_still_works()


def test_it_kills_a_cpu_hog_at_the_cpu_time_limit(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(
        ["python", "-c", "while True: pass"],
        workspace,
        Limits(**{**SMALL.__dict__, "cpu_seconds": 1, "wall_seconds": 20}),
    )
    assert result.exit_code == 128 + signal.SIGKILL and not result.timed_out
    assert result.duration_ms < 10_000 and host_still_works()


def test_it_kills_an_infinite_loop_at_the_wall_timeout(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(
        ["python", "-c", "while True: pass"], workspace, Limits(**{**SMALL.__dict__, "wall_seconds": 2})
    )
    assert result.timed_out and result.killed_by == "wall" and result.exit_code is None
    assert result.duration_ms < 8000 and host_still_works()


def test_it_bounds_and_stops_endless_output(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(["yes", "crucible"], workspace, SMALL)
    assert result.killed_by == "output" and result.truncated and result.exit_code is None
    assert result.stdout_bytes > SMALL.output_hard_bytes
    assert len(result.stdout.encode()) <= SMALL.output_bytes + 100
    assert result.stdout.startswith("crucible\n") and "bytes of output omitted" in result.stdout


def test_it_stops_a_disk_fill_at_the_file_size_limit(docker_backend: DockerBackend, workspace: Path) -> None:
    free_before = shutil.disk_usage(workspace).free
    result = docker_backend.run(["dd", "if=/dev/zero", "of=/workspace/big", "bs=1M", "count=100000"], workspace, SMALL)
    assert result.exit_code == 128 + signal.SIGXFSZ  # "file size limit exceeded", as on the host
    assert (workspace / "big").stat().st_size <= SMALL.file_size_mb * 1024 * 1024
    assert free_before - shutil.disk_usage(workspace).free < 256 * 1024 * 1024


def test_it_stops_a_workspace_fill_at_the_workspace_limit(docker_backend: DockerBackend, workspace: Path) -> None:
    fill = "i=0; while :; do head -c 8000000 /dev/zero > f$i || exit 9; i=$((i+1)); done"
    result = docker_backend.run(["sh", "-c", fill], workspace, SMALL)
    assert result.killed_by == "workspace" and result.exit_code is None
    used = sum(p.stat().st_size for p in workspace.glob("f*"))
    assert SMALL.workspace_mb * 1024 * 1024 < used < (SMALL.workspace_mb + 512) * 1024 * 1024


def test_it_gives_no_network_not_even_host_loopback(docker_backend: DockerBackend, workspace: Path) -> None:
    server = socket.socket()
    server.bind(("0.0.0.0", 0))  # noqa: S104 - the point is that even an all-interfaces server is unreachable
    server.listen()
    port = server.getsockname()[1]
    probe = textwrap.dedent(f"""
        import socket
        for host in ("127.0.0.1", {_host_address()!r}):
            try:
                socket.create_connection((host, {port}), timeout=2)
                print("CONNECTED", host)
            except OSError as exc:
                print("failed", host, exc.strerror)
        print(open("/proc/net/dev").read())
    """)
    result = docker_backend.run(["python", "-c", probe], workspace, SMALL)
    # A completed handshake would wait in the backlog and make the socket readable.
    connected = select.select([server], [], [], 0)[0]
    server.close()
    assert result.exit_code == 0, result.stderr
    assert "CONNECTED" not in result.stdout and result.stdout.count("failed") == 2
    interfaces = [line.split(":")[0].strip() for line in result.stdout.splitlines() if ":" in line and "|" not in line]
    assert interfaces == ["lo"]
    assert connected == []


def _host_address() -> str:
    """The host's own non-loopback address, where a server on 0.0.0.0 also listens."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
        return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


def test_it_hides_host_secrets_outside_the_workspace(
    docker_backend: DockerBackend, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("AKIA-HOST-SECRET")
    var = REPO / "var"
    var.mkdir(exist_ok=True)
    planted = var / f"sandbox-probe-{os.getpid()}.txt"
    planted.write_text("AKIA-VAR-SECRET")
    try:
        for path in (secret, planted, var / "secret_key", Path("/etc/shadow"), Path("/root/.bash_history")):
            result = docker_backend.run(["cat", str(path)], workspace, SMALL)
            assert result.exit_code == 1 and "No such file or directory" in result.stderr, path
            assert "AKIA" not in result.stdout
        listing = docker_backend.run(["sh", "-c", f"ls -a / {REPO}; cat /proc/1/environ"], workspace, SMALL)
        assert "var" not in listing.stdout.split(f"{REPO}:")[1].split() and "AKIA" not in listing.stdout
    finally:
        planted.unlink()


def test_it_refuses_writes_outside_the_workspace(
    docker_backend: DockerBackend, workspace: Path, tmp_path: Path
) -> None:
    escape = tmp_path / "escape.txt"
    targets = [
        escape,
        Path("/usr/evil"),
        Path("/etc/evil"),
        Path("/evil"),
        Path(sys.prefix) / "evil",
        Path(sys.base_prefix) / "evil",
    ]
    script = "; ".join(f"echo x > {t} 2>/dev/null && echo WROTE {t}" for t in targets)
    result = docker_backend.run(
        ["sh", "-c", f"{script}; echo ok > /tmp/crucible-private; cat /tmp/crucible-private"], workspace, SMALL
    )
    assert "WROTE" not in result.stdout and result.stdout == "ok\n"
    assert not any(t.exists() for t in targets)
    assert not Path("/tmp/crucible-private").exists()  # the container's /tmp is its own


def test_it_leaves_no_background_process_behind(docker_backend: DockerBackend, workspace: Path) -> None:
    result = docker_backend.run(["sh", "-c", "sleep 876504 & echo started"], workspace, SMALL)
    assert result.stdout == "started\n" and result.exit_code == 0
    assert processes_with("sleep 876504") == []
    timed = docker_backend.run(["sh", "-c", "sleep 876505 & sleep 876506"], workspace, Limits(wall_seconds=1))
    assert timed.killed_by == "wall"
    assert processes_with("sleep 876505") == [] and processes_with("sleep 876506") == []


def test_it_leaves_no_container_behind(docker_backend: DockerBackend, workspace: Path) -> None:
    docker_backend.run(["true"], workspace, SMALL)
    docker_backend.run(["yes"], workspace, SMALL)
    docker_backend.run(["sleep", "5"], workspace, Limits(wall_seconds=0.5))
    assert docker_backend.client.containers.list(all=True, filters={"label": LABEL}) == []
    assert docker_backend.client.containers.list(all=True) == []
