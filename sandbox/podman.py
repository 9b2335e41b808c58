"""A private Podman API service: the docker backend without a Docker engine (tests, bench).

Podman's `system service` speaks the Docker Engine API. Every service started here has
its own storage, run state, tmp, volume and network-config dirs under one temp dir, so
tests never touch (or depend on) the machine's global podman state, and the whole dir
is gone afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors

from sandbox.backends.docker import LABEL
from sandbox.process import stop_group

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0


class PodmanUnavailable(RuntimeError):
    """No private podman service could be started (not installed, or it failed to come up)."""


def podman_command(state: Path, socket_path: Path) -> list[str]:
    podman = shutil.which("podman")
    if podman is None or shutil.which("runc") is None:
        raise PodmanUnavailable("podman and runc are needed for the docker backend: `apt-get install -y podman runc`")
    return [
        podman,
        "--root",
        str(state / "root"),
        "--runroot",
        str(state / "runroot"),
        "--tmpdir",
        str(state / "tmp"),
        "--volumepath",
        str(state / "volumes"),
        "--network-config-dir",
        str(state / "networks"),
        # crun fails on this kernel; runc works (given explicit nofile/nproc ulimits).
        "--runtime",
        "runc",
        # No systemd or journald to lean on in CI containers; cgroupfs and a file always work.
        "--cgroup-manager",
        "cgroupfs",
        "--events-backend",
        "file",
        "system",
        "service",
        "--time=0",
        f"unix://{socket_path}",
    ]


@contextlib.contextmanager
def podman_service() -> Iterator[str]:
    """Start a private `podman system service`, yield its base_url, stop it and delete its state.

    Usable outside pytest too (the bench): failures raise PodmanUnavailable.
    """
    state = Path(tempfile.mkdtemp(prefix="crucible-podman-"))
    socket_path = state / "api.sock"
    base_url = f"unix://{socket_path}"
    log_path = state / "service.log"
    try:
        cmd = podman_command(state, socket_path)
    except PodmanUnavailable:
        shutil.rmtree(state, ignore_errors=True)
        raise
    # Image imports stage their layers in TMPDIR (default /var/tmp); keep that private too.
    env = {**os.environ, "TMPDIR": str(state / "tmp")}
    (state / "tmp").mkdir()
    proc: subprocess.Popen[bytes] | None = None
    try:
        with open(log_path, "wb") as log:
            # conmon leaves marker files (an empty `oom`) in its working directory: keep them in
            # the private state folder, not in whatever directory the caller ran from.
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=state,
                start_new_session=True,
            )
        _wait_until_up(proc, base_url, log_path)
        yield base_url
    finally:
        if proc is not None:
            _remove_sandbox_containers(base_url)
            _stop(proc)
        _unmount_under(state)
        shutil.rmtree(state, ignore_errors=True)


def _wait_until_up(proc: subprocess.Popen[bytes], base_url: str, log_path: Path) -> None:
    started = time.monotonic()
    last: Exception | None = None
    while time.monotonic() < started + START_TIMEOUT_S:
        if proc.poll() is not None:
            raise PodmanUnavailable(f"podman system service exited with {proc.returncode}: {_tail(log_path)}")
        try:
            client = docker.DockerClient(base_url=base_url, version="auto", timeout=5)
            try:
                if client.ping():
                    logger.info("podman service at %s up in %.0f ms", base_url, (time.monotonic() - started) * 1000)
                    return
            finally:
                client.close()
        except Exception as exc:  # no socket yet, or not answering yet: ask again
            last = exc
        time.sleep(0.05)
    raise PodmanUnavailable(
        f"podman system service did not answer within {START_TIMEOUT_S:.0f}s ({last}): {_tail(log_path)}"
    )


def _remove_sandbox_containers(base_url: str) -> None:
    """Containers outlive the service (conmon is their parent), so remove any left first."""
    try:
        client = docker.DockerClient(base_url=base_url, version="auto", timeout=30)
        try:
            for container in client.containers.list(all=True, filters={"label": LABEL}):
                with contextlib.suppress(docker.errors.APIError):  # not running: removal follows
                    container.kill()
                try:
                    container.remove(force=True)
                except docker.errors.APIError as exc:
                    logger.warning(
                        "podman service at %s: could not remove container %s: %s", base_url, container.short_id, exc
                    )
        finally:
            client.close()
    except Exception as exc:  # stopping the service and deleting its state still has to happen
        logger.warning("podman service at %s: could not remove leftover containers: %s", base_url, exc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    stop_group(proc, term_wait_s=10.0)


def _unmount_under(root: Path) -> None:
    """Podman bind-mounts its overlay dir onto itself; unmount (deepest first) so rmtree can work."""
    prefix = str(root.resolve()) + "/"
    mounts: list[str] = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as info:  # no /proc: nothing we could unmount
        for line in info:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                mounts.append(point)
    for point in sorted(mounts, key=len, reverse=True):
        done = subprocess.run(["umount", "--lazy", point], check=False, capture_output=True, text=True)
        if done.returncode != 0:
            logger.warning("could not unmount %s: %s", point, done.stderr.strip())


def _tail(path: Path, size: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError as exc:
        return f"(no log: {exc})"
