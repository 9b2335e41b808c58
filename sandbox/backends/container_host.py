"""The host side of the docker backend that needs no engine: the base image's rootfs,
handing a workspace to the sandbox user, and telling whose containers are orphans."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import socket
import stat
import tarfile
from pathlib import Path
from typing import Any

from sandbox.backends.base import SandboxError
from sandbox.runtime import USR_SYMLINKS

logger = logging.getLogger(__name__)

SANDBOX_USER = 65534  # nobody / nogroup
_PASSWD = b"root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/usr/sbin/nologin\n"
_GROUP = b"root:x:0:\nnogroup:x:65534:\n"


def base_image_tar(environment: Path | None = None) -> bytes:
    """The rootfs of the base image: empty dirs, merged-/usr symlinks, passwd and group.

    Everything else (/usr, the Python) comes from read-only binds, so the image needs
    no registry and stays a few kilobytes. Fixed mtimes keep the layer reproducible.
    With `environment`, that venv (a task's environment) is baked in at its host path:
    its packages travel in the image, not through a bind of the host's files.
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
        if environment is not None:
            _add_environment(tar, environment, set(tar.getnames()))
    return buf.getvalue()


def _add_environment(tar: tarfile.TarFile, environment: Path, present: set[str]) -> None:
    parts = environment.parts[1:]
    for depth in range(1, len(parts)):
        if "/".join(parts[:depth]) in present:
            continue  # /tmp, say: the base's own entry stands (a layer may not name a path twice)
        info = tarfile.TarInfo("/".join(parts[:depth]))
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
        tar.addfile(info)

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    tar.add(str(environment), arcname="/".join(parts), filter=owned_by_root)


def imported_id(result: Any) -> str:
    """The image id from an import response: a JSON status line (Docker and Podman)."""
    text = result.decode() if isinstance(result, bytes) else str(result)
    for line in reversed(text.strip().splitlines()):
        with contextlib.suppress(ValueError):  # progress lines that are not JSON carry no id
            doc = json.loads(line)
            for key in ("status", "id"):
                value = doc.get(key, "")
                if isinstance(value, str) and value.startswith("sha256:"):
                    return value
    raise SandboxError(f"unexpected image import response: {text[:200]}")


def hand_over(root: Path, uid: int = SANDBOX_USER, gid: int = SANDBOX_USER) -> None:
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
            continue  # removed while we walked: nothing to hand over
        if st.st_uid != uid or st.st_gid != gid:
            try:
                os.lchown(path, uid, gid)
            except OSError as exc:
                # The command will fail to write there, and say so; that is its result to report.
                logger.warning("cannot hand %s to the sandbox user: %s", path, exc)
        if stat.S_ISDIR(st.st_mode):
            try:
                with os.scandir(path) as entries:
                    stack.extend(e.path for e in entries)
            except OSError as exc:
                logger.warning("cannot list %s to hand it to the sandbox user: %s", path, exc)


def _start_time(pid: int) -> str | None:
    """A process's start time (clock ticks since boot), which tells a reused pid apart."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; fields after it don't.
    return stat_line.rsplit(")", 1)[-1].split()[19]


def owner() -> str:
    """host:pid:start-time of this process, for the owner label of the containers it makes."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid()) or ''}"


def orphaned(owner_label: str) -> bool:
    """Whether a container's owner label names a process of this host that no longer exists."""
    owner_host, _, rest = owner_label.partition(":")
    pid, _, start = rest.partition(":")
    return owner_host == socket.gethostname() and pid.isdigit() and not _process_alive(int(pid), start)


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
