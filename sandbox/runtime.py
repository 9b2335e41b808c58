"""The read-only runtime a sandboxed command sees: system dirs and one Python with pytest.

Only these paths are visible inside a sandbox besides the workspace; host secrets,
the project's own files and `var/` are not among them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_DIRS = (
    "/usr",
    "/etc/alternatives",
    "/etc/ssl/certs",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/mime.types",
)
# Debian's merged /usr: these are symlinks into /usr inside the sandbox.
USR_SYMLINKS = (("usr/bin", "/bin"), ("usr/sbin", "/sbin"), ("usr/lib", "/lib"), ("usr/lib64", "/lib64"))


@dataclass(frozen=True)
class Runtime:
    """Host paths mounted read-only at the same place, and the PATH to use inside."""

    ro_paths: tuple[str, ...]
    python: str
    path: str
    symlinks: tuple[tuple[str, str], ...] = field(default=USR_SYMLINKS)


def _python_prefixes() -> list[str]:
    """The interpreter running Crucible and its venv, which has pytest installed."""
    prefixes = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    return sorted(p for p in prefixes if not p.startswith("/usr/"))


def default_runtime() -> Runtime:
    ro = [p for p in SYSTEM_DIRS if os.path.exists(p)]
    ro += _python_prefixes()
    venv_bin = str(Path(sys.prefix) / "bin")
    # A venv's python is a symlink to the base interpreter; both prefixes are mounted.
    python = str(Path(venv_bin) / "python") if os.path.exists(Path(venv_bin) / "python") else sys.executable
    return Runtime(ro_paths=tuple(ro), python=python, path=f"{venv_bin}:/usr/local/bin:/usr/bin:/bin")
