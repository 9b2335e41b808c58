from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Limits, Sandbox
from sandbox.backends.base import Backend
from sandbox.backends.bwrap import BwrapBackend

DEMO_TASK = Path(__file__).resolve().parents[2] / "demo" / "tasks" / "task_0001"
SMALL = Limits(wall_seconds=20, pids=64, memory_mb=1024, workspace_mb=64, file_size_mb=16,
               output_bytes=8 * 1024, output_hard_bytes=4 * 1024 * 1024)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the guide's example repository (configkit at its buggy base)."""
    dest = tmp_path / "repo"
    shutil.copytree(DEMO_TASK / "repo_snapshot", dest)
    return dest


@pytest.fixture
def box(repo: Path) -> Iterator[Sandbox]:
    with Sandbox(repo, BwrapBackend(), limits=SMALL) as sandbox:
        yield sandbox


def backend_for(name: str, request: pytest.FixtureRequest) -> Backend:
    if name == "bwrap":
        return BwrapBackend()
    return request.getfixturevalue("docker_backend")  # type: ignore[no-any-return]
