"""Sandbox backend on the Docker Engine API (Docker itself, or Podman's API service).

One fresh container per command: no network, a read-only root made of an almost empty
local image plus the host runtime bind-mounted read-only, the workspace as the only
writable host path, cgroup and rlimit caps, and an unprivileged user with no
capabilities. Output is streamed through an attach socket opened before the start,
so nothing is lost at the start and nothing is ever written to a container log.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import socket
import stat
import struct
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests
from docker.types import Mount, Ulimit

from sandbox.backends.base import BASE_ENV, WORKSPACE_MOUNT, Backend, SandboxError
from sandbox.limits import Limits
from sandbox.output import BoundedBuffer
from sandbox.process import workspace_bytes
from sandbox.results import ExecResult
from sandbox.runtime import USR_SYMLINKS, Runtime, default_runtime

BASE_IMAGE = "crucible-sandbox-base:1"
SANDBOX_USER = 65534  # nobody / nogroup
LABEL = "crucible.sandbox"
# host:pid:start-time of the process that made a container, so a later process can tell
# containers whose owner died (SIGKILL, OOM) from ones still in use.
OWNER_LABEL = "crucible.sandbox.owner"
WORKSPACE_POLL_S = 0.1
SHARED_NPROC = 32768  # host-wide ceiling for all sandboxes together (see _host_config)
READ_CHUNK = 64 * 1024
# Attach stream framing (non-tty): 1 byte stream id, 3 padding, 4 bytes big-endian size.
FRAME_HEADER = struct.Struct(">BxxxI")
STDOUT, STDERR = 1, 2

_PASSWD = b"root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin\n"
_GROUP = b"root:x:0:\nnogroup:x:65534:\n"

_image_lock = threading.Lock()


def base_image_tar() -> bytes:
    """The rootfs of BASE_IMAGE: empty dirs, merged-/usr symlinks, passwd and group.

    Everything else (/usr, the Python) comes from read-only binds, so the image needs
    no registry and stays a few kilobytes. Fixed mtimes keep the layer reproducible.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(name: str, kind: bytes, mode: int, data: bytes = b"", link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.linkname, info.size = kind, mode, 0, link, len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for d in ("dev", "etc", "proc", "sys", "usr", "workspace"):
            add(d, tarfile.DIRTYPE, 0o755)
        add("tmp", tarfile.DIRTYPE, 0o1777)
        for target, link in USR_SYMLINKS:
            add(link.lstrip("/"), tarfile.SYMTYPE, 0o777, link=target)
        add("etc/passwd", tarfile.REGTYPE, 0o644, _PASSWD)
        add("etc/group", tarfile.REGTYPE, 0o644, _GROUP)
    return buf.getvalue()


def _hand_over(root: Path, uid: int, gid: int) -> None:
    """Make the workspace owned by the sandbox user so it can edit the files in it.

    Only done when we are root (the container user is not us); entries already owned
    are skipped, so repeated runs on one workspace cost a walk of lstat calls.
    """
    stack = [str(root)]
    while stack:
        path = stack.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_uid != uid or st.st_gid != gid:
            with contextlib.suppress(OSError):
                os.lchown(path, uid, gid)
        if stat.S_ISDIR(st.st_mode):
            with contextlib.suppress(OSError), os.scandir(path) as entries:
                stack.extend(e.path for e in entries)


class _Demux:
    """Splits the multiplexed attach stream into stdout and stderr as bytes arrive."""

    def __init__(self, out: BoundedBuffer, err: BoundedBuffer) -> None:
        self.sinks = {STDOUT: out, STDERR: err}
        self.pending = bytearray()
        self.stream = 0
        self.left = 0  # bytes of the current frame's payload still to come

    def feed(self, data: bytes) -> None:
        self.pending += data
        while self.pending:
            if self.left == 0:
                if len(self.pending) < FRAME_HEADER.size:
                    return
                self.stream, self.left = FRAME_HEADER.unpack_from(self.pending)
                del self.pending[: FRAME_HEADER.size]
                continue
            chunk = bytes(self.pending[: self.left])
            del self.pending[: len(chunk)]
            self.left -= len(chunk)
            sink = self.sinks.get(self.stream)
            if sink is not None:
                sink.append(chunk)


class DockerBackend(Backend):
    name = "docker"

    def __init__(self, base_url: str | None = None, image: str | None = None, runtime: Runtime | None = None) -> None:
        try:
            self.client = docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot reach a Docker API at {base_url or os.environ.get('DOCKER_HOST', 'the default socket')}: {exc}") from exc
        self.base_url = base_url or os.environ.get("DOCKER_HOST")
        self.api = self.client.api
        self.runtime = runtime or default_runtime()
        self.image = image or BASE_IMAGE
        self._image_ready = image is not None
        self._pids_cgroup: bool | None = None  # whether the engine enforces pids_limit; asked once
        # A killed worker can't remove its containers; the next backend on this host does.
        with contextlib.suppress(SandboxError, docker.errors.DockerException, requests.RequestException):
            self.reap_orphans()

    def close(self) -> None:
        self.client.close()

    def reap_orphans(self) -> int:
        """Remove sandbox containers made on this host by processes that no longer exist."""
        host = socket.gethostname()
        removed = 0
        for container in self.api.containers(all=True, filters={"label": LABEL}):
            owner_host, _, rest = ((container.get("Labels") or {}).get(OWNER_LABEL, "")).partition(":")
            pid, _, start = rest.partition(":")
            if owner_host != host or not pid.isdigit() or _process_alive(int(pid), start):
                continue
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
                try:
                    self.api.inspect_image(self.image)
                except docker.errors.ImageNotFound:
                    repo, tag = self.image.rsplit(":", 1)
                    result = self.api.import_image_from_data(base_image_tar(), repository=repo, tag=tag)
                    # Podman's compat import ignores `tag` and names the image `latest`; tag it here.
                    image_id = _imported_id(result)
                    self.api.tag(image_id, repo, tag)
                self._image_ready = True
        return self.image

    def _host_config(
        self, workspace: Path, limits: Limits,
        extra_ro_binds: Sequence[tuple[Path, str]], extra_rw_binds: Sequence[tuple[Path, str]],
    ) -> dict[str, Any]:
        mounts = [Mount(WORKSPACE_MOUNT, str(workspace), type="bind", read_only=False)]
        mounts += [Mount(p, p, type="bind", read_only=True) for p in self.runtime.ro_paths]
        mounts += [Mount(target, str(source), type="bind", read_only=True) for source, target in extra_ro_binds]
        mounts += [Mount(target, str(source), type="bind", read_only=False) for source, target in extra_rw_binds]
        memory = f"{limits.memory_mb}m"
        # RLIMIT_NPROC counts every process of the uid on the whole host, and all sandboxes
        # share uid 65534: at limits.pids, one fork bomb would starve every other sandbox's
        # fork(). The per-container cap is pids_limit (a cgroup); nproc is only the fallback.
        nproc = SHARED_NPROC if self._enforces_pids() else limits.pids
        return self.api.create_host_config(
            mounts=mounts,
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={limits.workspace_mb}m,mode=1777"},  # noqa: S108 - the container's own
            mem_limit=memory,
            memswap_limit=memory,  # same as memory: no swap to spill into
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
                _hand_over(path, SANDBOX_USER, SANDBOX_USER)
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
        result = self._run_container(argv, workspace, limits, environment, extra_ro_binds, extra_rw_binds, stdin,
                                     started)
        # Removing the container is part of what a command costs; count it.
        result.duration_ms = (time.monotonic() - started) * 1000
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
                name=f"crucible-sbx-{uuid.uuid4().hex[:16]}",
                labels={LABEL: "1", OWNER_LABEL: _owner()},
                host_config=self._host_config(workspace, limits, extra_ro_binds, extra_rw_binds),
            )
            container_id = created["Id"]
            params = {"stdout": 1, "stderr": 1, "stream": 1, "stdin": int(stdin is not None)}
            attached = self.api.attach_socket(container_id, params=params)
            sock: socket.socket = getattr(attached, "_sock", attached)
            try:
                self.api.start(container_id)
                startup_ms = (time.monotonic() - started) * 1000
                result = self._supervise(container_id, sock, workspace, limits, stdin, started, startup_ms)
            finally:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
                with contextlib.suppress(OSError, AttributeError):
                    attached.close()
            return result
        except (docker.errors.DockerException, requests.RequestException) as exc:
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
        sock: socket.socket,
        workspace: Path,
        limits: Limits,
        stdin: bytes | None,
        started: float,
        startup_ms: float,
    ) -> ExecResult:
        """Stream output, feed stdin and enforce the wall, output and workspace limits."""
        out, err = BoundedBuffer(limits.output_bytes), BoundedBuffer(limits.output_bytes)
        demux = _Demux(out, err)
        to_send = memoryview(stdin) if stdin is not None else None
        deadline = time.monotonic() + limits.wall_seconds
        next_poll = time.monotonic() + WORKSPACE_POLL_S
        workspace_limit = limits.workspace_mb << 20
        killed_by: str | None = None
        exit_code: int | None = None
        streaming = True
        status_delay = 0.005
        sock.setblocking(False)
        if to_send is not None and not to_send:
            sock.shutdown(socket.SHUT_WR)
            to_send = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                killed_by = "wall"
                break
            if now >= next_poll:
                walk_started = time.monotonic()
                if workspace_bytes(workspace) > workspace_limit:
                    killed_by = "workspace"
                    break
                # A huge workspace takes long to walk; don't spend most of a core on it.
                next_poll = now + max(WORKSPACE_POLL_S, 5 * (time.monotonic() - walk_started))
            wake = min(deadline, next_poll)
            if not streaming:
                # The stream ends when the command closes its output, usually because it
                # exited; it may also have closed stdout/stderr and kept running.
                exited, exit_code = self._exit_status(container_id)
                if exited:
                    break
                time.sleep(max(0.0, min(status_delay, wake - time.monotonic())))
                status_delay = min(status_delay * 1.5, WORKSPACE_POLL_S)
                continue
            # An SSL socket may hold decrypted bytes select() can't see.
            pending = getattr(sock, "pending", None)
            if pending is not None and pending():
                readable = [sock]
            else:
                writers = [sock] if to_send is not None else []
                readable, writable, _ = select.select([sock], writers, [], max(0.0, wake - now))
                if writable and to_send is not None:
                    to_send = self._feed(sock, to_send)
            if not readable:
                continue
            try:
                data = sock.recv(READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                streaming = False
                continue
            demux.feed(data)
            if out.total + err.total > limits.output_hard_bytes:
                killed_by = "output"
                break

        if killed_by is not None:
            exit_code = None
            # Hang up first: Podman's kill waits for the exit, and conmon can't see the exit
            # while it is blocked writing output to a stream nobody reads (a 5 s stall).
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # close() alone waits for the SDK's file wrapper
            self._kill(container_id)
        return ExecResult(
            exit_code=exit_code,
            stdout=out.text(),
            stderr=err.text(),
            truncated=out.truncated or err.truncated or killed_by == "output",
            timed_out=killed_by == "wall",
            duration_ms=(time.monotonic() - started) * 1000,
            startup_ms=startup_ms,
            killed_by=killed_by,
            stdout_bytes=out.total,
            stderr_bytes=err.total,
        )

    @staticmethod
    def _feed(sock: socket.socket, to_send: memoryview) -> memoryview | None:
        """Send the next piece of stdin; None once all of it is sent and stdin is closed."""
        try:
            sent = sock.send(to_send[:READ_CHUNK])
        except BlockingIOError:
            return to_send
        except OSError:  # the command closed stdin or exited: the rest is not wanted
            sent = len(to_send)
        rest = to_send[sent:]
        if rest:
            return rest
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        return None

    def _exit_status(self, container_id: str) -> tuple[bool, int | None]:
        """(exited, exit code), from inspect.

        Not wait(): Podman's wait returns only after its out-of-process `container
        cleanup` has finished, 100-300 ms after the exit, while inspect already shows
        the status ("stopped" on Podman, "exited" on Docker).
        """
        try:
            state = self.api.inspect_container(container_id).get("State") or {}
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise SandboxError(f"could not read the exit status: {exc}") from exc
        if state.get("Running") or state.get("Status") not in ("exited", "stopped", "dead"):
            return False, None
        code = state.get("ExitCode")
        return True, int(code) if code is not None else None

    def _kill(self, container_id: str) -> None:
        # SIGKILL now: stop and rm -f send SIGTERM first and may wait 10 s for it to work.
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
            self.api.kill(container_id, signal="SIGKILL")

    def _destroy(self, container_id: str, kill: bool = True, quiet: bool = False) -> None:
        if kill:
            self._kill(container_id)
        last: Exception | None = None
        for _ in range(3):
            try:
                self.api.remove_container(container_id, force=True, v=True)
                return
            except docker.errors.NotFound:
                return
            except (docker.errors.DockerException, requests.RequestException) as exc:
                last = exc
                time.sleep(0.1)
        if not quiet:
            raise SandboxError(f"could not remove sandbox container {container_id[:12]}: {last}")


def _imported_id(result: Any) -> str:
    """The image id from an import response: a JSON status line (Docker and Podman)."""
    text = result.decode() if isinstance(result, bytes) else str(result)
    for line in reversed(text.strip().splitlines()):
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            for key in ("status", "id"):
                value = doc.get(key, "")
                if isinstance(value, str) and value.startswith("sha256:"):
                    return value
    raise SandboxError(f"unexpected image import response: {text[:200]}")


def _start_time(pid: int) -> str | None:
    """A process's start time (clock ticks since boot), which tells a reused pid apart."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; fields after it don't.
    return stat_line.rsplit(")", 1)[-1].split()[19]


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid()) or ''}"


def _process_alive(pid: int, start: str) -> bool:
    current = _start_time(pid)
    if current is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not start  # no /proc: all we can tell is that the pid exists
    return not start or current == start
