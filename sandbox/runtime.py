"""The read-only runtime a sandboxed command sees: system dirs, one interpreter and the test runner.

Only these paths are visible inside a sandbox besides the workspace; host secrets, the
project's own files, `var/` and Crucible's own site-packages are not among them. The
sandbox's `python` is the runner venv (sandbox/runner_env.py): the interpreter's standard
library plus pytest, so a repository's imports find the repository's code or nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.runner_env import EMPTY_DIR, ensure_runner_env, runner_root

logger = logging.getLogger(__name__)

# Each is one mount per command started (~0.13 ms): only what commands read. The dynamic
# loader reads ld.so.cache alone; ld.so.conf is ldconfig's, which cannot run in a sandbox.
SYSTEM_DIRS = (
    "/usr",
    "/etc/alternatives",
    "/etc/ssl/certs",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/mime.types",
)
# The sandbox's /etc/hosts, never the host's (which may name the host's network): "localhost" must
# resolve, inside a network namespace that has only loopback, for a test runner or a test that
# serves on it (Vite 7's dev server asks for localhost; without an entry it fails EAI_AGAIN).
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
# Debian's merged /usr: these are symlinks into /usr inside the sandbox.
USR_SYMLINKS = (("usr/bin", "/bin"), ("usr/sbin", "/sbin"), ("usr/lib", "/lib"), ("usr/lib64", "/lib64"))


@dataclass(frozen=True)
class Runtime:
    """Host paths mounted read-only at the same place, and the PATH to use inside.

    `hidden` are directories inside those paths that a backend covers with `empty`, an
    empty directory mounted read-only: the base interpreter's site-packages, where
    Crucible's packages are when it runs without a venv (and a pile of others when it
    runs in one).
    """

    ro_paths: tuple[str, ...]
    python: str
    path: str
    symlinks: tuple[tuple[str, str], ...] = field(default=USR_SYMLINKS)
    hidden: tuple[str, ...] = ()
    empty: str = ""
    # A copy of the /etc entries of ro_paths in one directory, for a backend to mount as /etc
    # in one go ("" when it could not be made: the entries are then mounted one by one).
    etc: str = ""


def _base_prefixes() -> list[str]:
    """The interpreter the runner venv is made from (its stdlib and binary), when not under /usr."""
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    return sorted(p for p in prefixes if not p.startswith("/usr/"))


def _base_site_packages(mounted: list[str]) -> list[str]:
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    found = {os.path.realpath(sysconfig.get_paths(vars=base)[key]) for key in ("purelib", "platlib")}
    return sorted(p for p in found if os.path.isdir(p) and any(p.startswith(m + "/") for m in mounted))


def default_runtime() -> Runtime:
    """The runner venv's runtime: the interpreter's standard library and pytest, nothing else."""
    return venv_runtime(str(ensure_runner_env()))


def _etc_key(sources: tuple[str, ...]) -> str:
    """What the copy depends on: each source's inode, size and time. dpkg and update-ca-certificates
    replace a file by renaming a new one over it, which changes these (and a directory's time)."""
    digest = hashlib.sha256(HOSTS.encode())
    for source in sources:
        st = os.lstat(source)
        digest.update(f"{source}\0{st.st_ino}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _prepared_etc(sources: tuple[str, ...], key: str, etc: str) -> str:
    target = runner_root() / f"etc-{key}"
    if target.is_dir():
        return str(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".etc-", dir=target.parent))
        for source in sources:
            inside = staging / os.path.relpath(source, etc)
            inside.parent.mkdir(parents=True, exist_ok=True)
            if os.path.isdir(source) and not os.path.islink(source):
                shutil.copytree(source, inside, symlinks=True)
            else:
                shutil.copy2(source, inside, follow_symlinks=False)
        (staging / "hosts").write_text(HOSTS)
        os.chmod(staging / "hosts", 0o644)
        for directory, _, _ in os.walk(staging):
            os.chmod(directory, 0o755)  # noqa: S103 - read by the sandbox's user, mounted read-only
        try:
            staging.rename(target)
        except OSError:  # another process made the same copy first: theirs is as good
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:
        logger.warning("sandbox runtime: cannot copy /etc into %s (%s); mounting its files one by one", target, exc)
        return ""
    return str(target)


def prepared_etc(ro_paths: tuple[str, ...], etc: str = "/etc") -> str:
    """One directory holding the /etc entries of `ro_paths`, made once per version of them.

    Each bind mount costs a sandbox start about 0.13 ms; the five /etc files commands read are
    one mount this way. The copy is taken again whenever a source changes (a package upgrade
    writes a new ld.so.cache), so the sandbox never reads a stale one.
    """
    sources = tuple(p for p in ro_paths if p.startswith(etc + "/"))
    if not sources:
        return ""
    try:
        key = _etc_key(sources)
    except OSError:
        return ""
    return _prepared_etc(sources, key, etc)


def venv_runtime(venv_dir: str, mounted: bool = True) -> Runtime:
    """A runtime whose `python` is the venv at `venv_dir` (the runner, or a task's environment).

    `mounted=False` when the venv is already inside the backend's image (the docker backend's
    environment images) rather than bound from the host.
    """
    prefixes = _base_prefixes()
    ro = [p for p in SYSTEM_DIRS if os.path.exists(p)] + prefixes + ([venv_dir] if mounted else [])
    venv_bin = f"{venv_dir}/bin"
    return Runtime(
        ro_paths=tuple(ro),
        python=f"{venv_bin}/python",
        path=f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        hidden=tuple(_base_site_packages(prefixes)),
        empty=f"{venv_dir}/{EMPTY_DIR}",
        etc=prepared_etc(tuple(ro)),
    )
