"""Resolving agent-given paths inside a workspace, refusing any way out."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath


class ToolError(ValueError):
    """An agent's tool call that cannot be done; the message is shown to the agent."""


def resolve(workspace: Path, rel: str, *, must_exist: bool = False) -> Path:
    if not isinstance(rel, str) or not rel.strip():
        raise ToolError("a path is required")
    if "\x00" in rel:
        raise ToolError("path contains a NUL byte")
    rel = rel.strip()
    if rel.startswith("/workspace/"):
        rel = rel[len("/workspace/") :]  # the agent sees the workspace mounted there
    pure = PurePosixPath(rel)
    if pure.is_absolute():
        raise ToolError(f"{rel}: absolute paths are not allowed; use a path relative to the workspace")
    if ".." in pure.parts:
        raise ToolError(f"{rel}: '..' is not allowed in paths")
    root = workspace.resolve()
    target = root.joinpath(*pure.parts) if pure.parts else root
    # Resolve symlinks the agent may have planted: the real path must stay inside.
    real = Path(os.path.realpath(target))
    if real != root and not real.is_relative_to(root):
        raise ToolError(f"{rel}: resolves outside the workspace (through a symbolic link)")
    if must_exist and not real.exists():
        raise ToolError(f"{rel}: no such file or directory")
    return real
