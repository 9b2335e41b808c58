from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Limits, Sandbox
from sandbox.backends.base import Backend
from sandbox.backends.bwrap import BwrapBackend
from sandbox.backends.docker import DockerBackend
from sandbox.backends.local import LocalBackend
from sandbox.names import BackendName
from sandbox.podman import PodmanUnavailable, podman_service

DEMO_TASK = Path(__file__).resolve().parents[2] / "demo" / "tasks" / "task_0001"
SMALL = Limits(
    wall_seconds=20,
    pids=64,
    memory_mb=1024,
    workspace_mb=64,
    file_size_mb=16,
    output_bytes=8 * 1024,
    output_hard_bytes=4 * 1024 * 1024,
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the parse_config example repository (configkit at its buggy base)."""
    dest = tmp_path / "repo"
    shutil.copytree(DEMO_TASK / "repo_snapshot", dest)
    return dest


@pytest.fixture
def box(repo: Path) -> Iterator[Sandbox]:
    with Sandbox(repo, BwrapBackend(), limits=SMALL) as sandbox:
        yield sandbox


def backend_for(name: BackendName, request: pytest.FixtureRequest) -> Backend:
    if name == BackendName.BWRAP:
        return BwrapBackend()
    if name == BackendName.LOCAL:
        return LocalBackend(allow_unsafe=True)
    return request.getfixturevalue("docker_backend")  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def docker_backend() -> Iterator[DockerBackend]:
    """A DockerBackend talking to a private podman service for the whole test session.

    A missing or broken podman fails the tests that need it; it never skips them.
    """
    with contextlib.ExitStack() as stack:
        problem = ""
        try:
            base_url = stack.enter_context(podman_service())
        except PodmanUnavailable as exc:
            problem = str(exc)
        if problem:
            pytest.fail(problem, pytrace=False)
        backend = DockerBackend(base_url=base_url)
        stack.callback(backend.close)
        yield backend
