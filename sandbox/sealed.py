"""Installed trees made read-only once complete (toolchains, node_modules, build caches), and writable
again only to remove a failed install's staging."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def seal_tree(tree: Path) -> None:
    """Every file and folder under `tree` read-only (an installed toolchain or cache, mounted so too);
    executables stay executable, links are left as they are."""
    for directory, _, files in os.walk(tree):
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                path.chmod(0o555 if path.stat().st_mode & 0o111 else 0o444)
        os.chmod(directory, 0o555)  # noqa: S103 - read by the sandbox's user, mounted read-only


def unseal_tree(tree: Path) -> None:
    """Every folder under `tree` writable again, so a failed install's staging can be removed."""
    for directory, _, _ in os.walk(tree):
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o755)  # noqa: S103
