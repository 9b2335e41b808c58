"""The read-only runtime a sandboxed command sees: system dirs, one interpreter and the test runner.

Only these paths are visible inside a sandbox besides the workspace; host secrets, the
project's own files, `var/` and Crucible's own site-packages are not among them. The
sandbox's `python` is the runner venv (sandbox/runner_env.py): the interpreter's standard
library plus pytest, so a repository's imports find the repository's code or nothing.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from dataclasses import dataclass, field

from sandbox.runner_env import EMPTY_DIR, ensure_runner_env

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
    )
