"""The contract every sandbox backend meets.

A backend runs one command in a fresh isolated environment whose only writable,
visible project state is the workspace directory (mounted at WORKSPACE_MOUNT). It
must: give the command no network, show it no host files except a read-only runtime,
enforce `Limits`, kill everything the command started when it ends or times out, and
never leave a process or temp dir behind.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox.limits import Limits
from sandbox.names import BackendName
from sandbox.results import ExecResult
from sandbox.runtime import Runtime, venv_runtime

if TYPE_CHECKING:
    from sandbox.environments import Environment

WORKSPACE_MOUNT = "/workspace"
# The environment a command starts with; the host's is never passed through.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",  # noqa: S108 - the sandbox's own private tmpfs
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    # No user site-packages: under the local backend, HOME=/tmp is the host's own /tmp.
    "PYTHONNOUSERSITE": "1",
}


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the command in it)."""


class Backend(ABC):
    name: BackendName
    runtime: Runtime

    def for_environment(self, environment: Environment) -> Backend:
        """This backend with `environment`'s venv as the sandbox's Python (a task's dependencies).

        A copy: the backend a caller handed over keeps running the plain runner.
        """
        clone = copy.copy(self)
        clone.runtime = venv_runtime(str(environment.path))
        return clone

    @abstractmethod
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
        """Run argv with cwd WORKSPACE_MOUNT.

        `extra_ro_binds` / `extra_rw_binds` are (host path, sandbox path) pairs; the
        test runner uses a read-write one for its JUnit report, outside the workspace.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release anything the backend holds (a client, a container)."""
