"""Sandbox backend on the Docker Engine API (Docker itself, or Podman's API service).

One fresh container per command: no network, a read-only root made of an almost empty
local image plus the host runtime bind-mounted read-only, the workspace as the only
writable host path, cgroup and rlimit caps, and an unprivileged user with no
capabilities. Output is streamed through an attach socket opened before the start,
so nothing is lost at the start and nothing is ever written to a container log.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import select
import socket
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests
from docker.types import Mount, Ulimit

from sandbox.backends.base import BASE_ENV, WORKSPACE_MOUNT, Backend, SandboxError
from sandbox.backends.container_host import SANDBOX_USER, base_image_tar, hand_over, imported_id, orphaned, owner
from sandbox.environments import Environment
from sandbox.limits import Limits
from sandbox.names import BackendName
from sandbox.results import ExecResult
from sandbox.runtime import Runtime, default_runtime, venv_runtime
from sandbox.supervise import READ_CHUNK, STDERR, STDOUT, Exit, Output, supervise

logger = logging.getLogger(__name__)

BASE_IMAGE = "crucible-sandbox-base:1"
ENV_IMAGE = "crucible-env"
LABEL = "crucible.sandbox"
# host:pid:start-time of the process that made a container, so a later process can tell
# containers whose owner died (SIGKILL, OOM) from ones still in use.
OWNER_LABEL = "crucible.sandbox.owner"
SHARED_NPROC = 32768  # host-wide ceiling for all sandboxes together (see _host_config)
# Attach stream framing (non-tty): 1 byte stream id, 3 padding, 4 bytes big-endian size.
FRAME_HEADER = struct.Struct(">BxxxI")
FRAME_STREAMS = {1: STDOUT, 2: STDERR}
ENGINE_ERRORS = (docker.errors.DockerException, requests.RequestException)

_image_lock = threading.Lock()


class _Demux:
    """Splits the multiplexed attach stream into stdout and stderr chunks as bytes arrive."""

    def __init__(self) -> None:
        self.pending = bytearray()
        self.stream = 0
        self.left = 0  # bytes of the current frame's payload still to come

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        chunks: list[tuple[int, bytes]] = []
        self.pending += data
        while self.pending:
            if self.left == 0:
                if len(self.pending) < FRAME_HEADER.size:
                    break
                self.stream, self.left = FRAME_HEADER.unpack_from(self.pending)
                del self.pending[: FRAME_HEADER.size]
                continue
            chunk = bytes(self.pending[: self.left])
            del self.pending[: len(chunk)]
            self.left -= len(chunk)
            if self.stream in FRAME_STREAMS:
                chunks.append((FRAME_STREAMS[self.stream], chunk))
        return chunks


class DockerBackend(Backend):
    name = BackendName.DOCKER

    def __init__(self, base_url: str | None = None, image: str | None = None, runtime: Runtime | None = None) -> None:
        where = base_url or os.environ.get("DOCKER_HOST", "the default socket")
        try:
            self.client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
        except docker.errors.DockerException as exc:
            logger.error("docker backend: cannot reach a Docker API at %s: %s", where, exc)
            raise SandboxError(f"cannot reach a Docker API at {where}: {exc}") from exc
        self.base_url = base_url or os.environ.get("DOCKER_HOST")
        self.api = self.client.api
        self.runtime = runtime or default_runtime()
        self.image = image or BASE_IMAGE
        self._image_ready = image is not None
        self._pids_cgroup: bool | None = None  # whether the engine enforces pids_limit; asked once
        # A killed worker can't remove its containers; the next backend on this host does.
        try:
            self.reap_orphans()
        except (SandboxError, *ENGINE_ERRORS) as exc:
            logger.warning("docker backend at %s: could not reap orphaned containers: %s", where, exc)

    def close(self) -> None:
        self.client.close()

    def reap_orphans(self) -> int:
        """Remove sandbox containers made on this host by processes that no longer exist."""
        removed = 0
        for container in self.api.containers(all=True, filters={"label": LABEL}):
            owner_label = (container.get("Labels") or {}).get(OWNER_LABEL, "")
            if orphaned(owner_label):
                logger.info("reaping sandbox container %s: its owner %s is gone", container["Id"][:12], owner_label)
                self._destroy(container["Id"], quiet=True)
                removed += 1
        return removed

    def _enforces_pids(self) -> bool:
        if self._pids_cgroup is None:
            info = self.api.info()
            if info.get("MemoryLimit") is False:
                raise SandboxError("this Docker engine cannot enforce memory limits (no memory cgroup)")
            self._pids_cgroup = info.get("PidsLimit") is not False
        return self._pids_cgroup

    def ensure_image(self) -> str:
        """Create BASE_IMAGE locally on first use; there is no registry to pull from."""
        if self._image_ready:
            return self.image
        with _image_lock:
            if not self._image_ready:
                self._import_once(self.image, base_image_tar)
                self._image_ready = True
        return self.image

    def for_environment(self, environment: Environment) -> DockerBackend:
        """This backend running commands in an image with the task's environment baked in."""
        clone = copy.copy(self)
        clone.image = self.ensure_environment_image(environment)
        clone._image_ready = True
        clone.runtime = venv_runtime(str(environment.path), mounted=False)
        return clone

    def ensure_environment_image(self, environment: Environment) -> str:
        """`crucible-env:<key>`: the base rootfs plus the environment, imported once per engine."""
        tag = f"{ENV_IMAGE}:{environment.key}"
        with _image_lock:
            self._import_once(tag, lambda: base_image_tar(environment.path))
        return tag

    def _import_once(self, image: str, rootfs: Callable[[], bytes]) -> None:
        """Import `image` from a rootfs tar unless the engine has it; the caller holds _image_lock."""
        try:
            self.api.inspect_image(image)
            return
        except docker.errors.ImageNotFound:
            pass
        started = time.monotonic()
        repo, tag = image.rsplit(":", 1)
        result = self.api.import_image_from_data(rootfs(), repository=repo, tag=tag)
        # Podman's compat import ignores `tag` and names the image `latest`; tag it here.
        self.api.tag(imported_id(result), repo, tag)
        logger.info("docker backend: created %s in %.0f ms", image, (time.monotonic() - started) * 1000)

    def _host_config(
        self,
        workspace: Path,
        limits: Limits,
        extra_ro_binds: Sequence[tuple[Path, str]],
        extra_rw_binds: Sequence[tuple[Path, str]],
    ) -> dict[str, Any]:
        mounts = [Mount(WORKSPACE_MOUNT, str(workspace), type="bind", read_only=False)]
        mounts += [Mount(p, p, type="bind", read_only=True) for p in self.runtime.ro_paths]
        mounts += [Mount(p, self.runtime.empty, type="bind", read_only=True) for p in self.runtime.hidden]
        mounts += [Mount(target, str(source), type="bind", read_only=True) for source, target in extra_ro_binds]
        mounts += [Mount(target, str(source), type="bind", read_only=False) for source, target in extra_rw_binds]
        memory = f"{limits.memory_mb}m"
        tmp_mb, shm_mb = limits.tmpfs_mb()
        # RLIMIT_NPROC counts every process of the uid on the whole host, and all sandboxes
        # share uid 65534: at limits.pids, one fork bomb would starve every other sandbox's
        # fork(). The per-container cap is pids_limit (a cgroup); nproc is only the fallback.
        nproc = SHARED_NPROC if self._enforces_pids() else limits.pids
        return self.api.create_host_config(
            mounts=mounts,
            network_mode="none",
            read_only=True,
            # The container's own /tmp, not the host's.
            tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={tmp_mb}m,mode=1777"},  # noqa: S108
            # The container's memory cgroup counts its processes and its tmpfs pages alike.
            mem_limit=memory,
            memswap_limit=memory,  # same as memory: no swap to spill into
            shm_size=f"{shm_mb}m",
            pids_limit=limits.pids,
            nano_cpus=1_000_000_000,
            ulimits=[
                Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
                Ulimit(name="nproc", soft=nproc, hard=nproc),
                Ulimit(name="fsize", soft=limits.file_size_mb << 20, hard=limits.file_size_mb << 20),
                Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds),
            ],
            # A tiny init (docker-init / catatonit) is pid 1, not the command: the kernel drops
            # default-action signals to a namespace's pid 1, so SIGXFSZ, SIGTERM or SIGINT
            # would not end the command the way they do on the host and under bwrap.
            init=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            # Output is read from the attach stream; a log file would only let endless output fill the disk.
            log_config={"Type": "none", "Config": {}},
        )

    def _user(self, writable: Sequence[Path]) -> str:
        if os.geteuid() == 0:
            for path in writable:
                hand_over(path)
            return f"{SANDBOX_USER}:{SANDBOX_USER}"
        # Not root: files can't be given away, but our own uid is already unprivileged.
        return f"{os.getuid()}:{os.getgid()}"

    def run(
        self,
        argv: Sequence[str],
        workspace: Path,
        limits: Limits,
        env: Mapping[str, str] | None = None,
        extra_ro_binds: Sequence[tuple[Path, str]] = (),
        stdin: bytes | None = None,
        extra_rw_binds: Sequence[tuple[Path, str]] = (),
    ) -> ExecResult:
        started = time.monotonic()
        workspace = Path(workspace).resolve()
        if not workspace.is_dir():
            raise SandboxError(f"workspace {workspace} is not a directory")
        if not argv:
            raise SandboxError("empty command")
        environment = {**BASE_ENV, "PATH": self.runtime.path, **(env or {})}
        result = self._run_container(
            argv, workspace, limits, environment, extra_ro_binds, extra_rw_binds, stdin, started
        )
        # Removing the container is part of what a command costs; count it.
        result.duration_ms = round((time.monotonic() - started) * 1000, 3)
        return result

    def _run_container(
        self,
        argv: Sequence[str],
        workspace: Path,
        limits: Limits,
        environment: dict[str, str],
        extra_ro_binds: Sequence[tuple[Path, str]],
        extra_rw_binds: Sequence[tuple[Path, str]],
        stdin: bytes | None,
        started: float,
    ) -> ExecResult:
        name = f"crucible-sbx-{uuid.uuid4().hex[:16]}"
        container_id: str | None = None
        try:
            image = self.ensure_image()
            user = self._user([workspace, *(Path(host) for host, _ in extra_rw_binds)])
            created = self.api.create_container(
                image,
                command=list(argv),
                user=user,
                working_dir=WORKSPACE_MOUNT,
                environment=environment,
                stdin_open=stdin is not None,
                network_disabled=True,
                name=name,
                labels={LABEL: "1", OWNER_LABEL: owner()},
                host_config=self._host_config(workspace, limits, extra_ro_binds, extra_rw_binds),
            )
            container_id = created["Id"]
            params = {"stdout": 1, "stderr": 1, "stream": 1, "stdin": int(stdin is not None)}
            attached = self.api.attach_socket(container_id, params=params)
            sock: socket.socket = getattr(attached, "_sock", attached)
            try:
                self.api.start(container_id)
                startup_ms = (time.monotonic() - started) * 1000
                return self._supervise(container_id, name, sock, workspace, limits, stdin, started, startup_ms)
            finally:
                _hang_up(sock)
                with contextlib.suppress(OSError, AttributeError):  # the SDK's wrapper over the closed socket
                    attached.close()
        except ENGINE_ERRORS as exc:
            logger.error(
                "sandbox %s: the engine failed after %.0f ms: %s", name, (time.monotonic() - started) * 1000, exc
            )
            raise SandboxError(f"docker backend failed: {exc}") from exc
        finally:
            if container_id is not None:
                # While an error is already on its way out, a failed cleanup must not replace it.
                failing = sys.exc_info()[0] is not None
                # Whatever state an error left the container in, SIGKILL it before removing.
                self._destroy(container_id, kill=failing, quiet=failing)

    def _supervise(
        self,
        container_id: str,
        name: str,
        sock: socket.socket,
        workspace: Path,
        limits: Limits,
        stdin: bytes | None,
        started: float,
        startup_ms: float,
    ) -> ExecResult:
        return supervise(_Attached(self, container_id, name, sock, stdin, startup_ms), limits, workspace, started)

    def exit_status(self, container_id: str) -> Exit | None:
        """The exit, from inspect; None while the container runs.

        Not wait(): Podman's wait returns only after its out-of-process `container
        cleanup` has finished, 100-300 ms after the exit, while inspect already shows
        the status ("stopped" on Podman, "exited" on Docker).
        """
        try:
            state = self.api.inspect_container(container_id).get("State") or {}
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"could not read the exit status: {exc}") from exc
        if state.get("Running") or state.get("Status") not in ("exited", "stopped", "dead"):
            return None
        code = state.get("ExitCode")
        return Exit(int(code) if code is not None else None, out_of_memory=bool(state.get("OOMKilled")))

    def kill(self, container_id: str) -> None:
        # SIGKILL now: stop and rm -f send SIGTERM first and may wait 10 s for it to work.
        try:
            self.api.kill(container_id, signal="SIGKILL")
        except docker.errors.NotFound:
            pass  # already removed: nothing left to kill
        except ENGINE_ERRORS as exc:
            # Usually "not running": it exited between the decision and the kill; removal follows anyway.
            logger.debug("sandbox container %s: kill: %s", container_id[:12], exc)

    def _destroy(self, container_id: str, kill: bool = True, quiet: bool = False) -> None:
        if kill:
            self.kill(container_id)
        last: Exception | None = None
        for _ in range(3):
            try:
                self.api.remove_container(container_id, force=True, v=True)
                return
            except docker.errors.NotFound:
                return
            except ENGINE_ERRORS as exc:
                last = exc
                time.sleep(0.1)
        if not quiet:
            raise SandboxError(f"could not remove sandbox container {container_id[:12]}: {last}")
        logger.error("sandbox container %s: could not remove it (the next reap will): %s", container_id[:12], last)


class _Attached:
    """A started container as the supervisor sees it: the attach socket, stdin, inspect and kill."""

    def __init__(
        self,
        backend: DockerBackend,
        container_id: str,
        ident: str,
        sock: socket.socket,
        stdin: bytes | None,
        startup_ms: float,
    ) -> None:
        self.backend = backend
        self.container_id = container_id
        self.ident = ident
        self.sock = sock
        self.startup_ms = startup_ms
        self.demux = _Demux()
        self.to_send = memoryview(stdin) if stdin else None
        sock.setblocking(False)
        if stdin is not None and not stdin:
            sock.shutdown(socket.SHUT_WR)

    def read(self, timeout: float) -> Output:
        seen = Output()
        # An SSL socket may hold decrypted bytes select() can't see.
        pending = getattr(self.sock, "pending", None)
        if pending is None or not pending():
            writers = [self.sock] if self.to_send is not None else []
            readable, writable, _ = select.select([self.sock], writers, [], timeout)
            if writable:
                self._feed()
            if not readable:
                return seen
        try:
            data = self.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return seen
        except OSError as exc:
            logger.debug("sandbox %s: the attach stream broke (%s); reading it as the end of output", self.ident, exc)
            data = b""
        if data:
            seen.chunks = self.demux.feed(data)
        else:
            seen.closed = True
        return seen

    def _feed(self) -> None:
        """Send the next piece of stdin, and close stdin once all of it is sent."""
        assert self.to_send is not None
        try:
            sent = self.sock.send(self.to_send[:READ_CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the command closed stdin or exited: the rest is not wanted
            sent = len(self.to_send)
        self.to_send = self.to_send[sent:] or None
        if self.to_send is None:
            with contextlib.suppress(OSError):  # the stream is already down: stdin is closed with it
                self.sock.shutdown(socket.SHUT_WR)

    def wait(self, timeout: float) -> Exit | None:
        ended = self.backend.exit_status(self.container_id)
        if ended is None:
            time.sleep(timeout)
        return ended

    def kill(self) -> None:
        # Hang up first: Podman's kill waits for the exit, and conmon can't see the exit
        # while it is blocked writing output to a stream nobody reads (a 5 s stall).
        _hang_up(self.sock, close=False)
        self.backend.kill(self.container_id)


def _hang_up(sock: socket.socket, close: bool = True) -> None:
    # shutdown, since close() alone waits for the SDK's file wrapper to let go of the socket.
    with contextlib.suppress(OSError):  # already shut down, or the engine hung up first
        sock.shutdown(socket.SHUT_RDWR)
    if close:
        with contextlib.suppress(OSError):
            sock.close()
