"""Plain subprocess with rlimits, for machines with neither bwrap nor a container engine.

It does not isolate: the command sees the host's files and network. So it refuses to
run unless explicitly allowed, and says why.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from sandbox.backends.base import BASE_ENV, Backend, SandboxError
from sandbox.limits import Limits
from sandbox.names import BackendName
from sandbox.process import run_process
from sandbox.results import ExecResult
from sandbox.runtime import Runtime, default_runtime

logger = logging.getLogger(__name__)

ALLOW_ENV = "CRUCIBLE_ALLOW_LOCAL_SANDBOX"


class LocalBackend(Backend):
    name = BackendName.LOCAL

    def __init__(self, allow_unsafe: bool = False, runtime: Runtime | None = None) -> None:
        if not (allow_unsafe or os.environ.get(ALLOW_ENV) == "1"):
            logger.warning("local backend refused: it does not isolate and was not explicitly allowed")
            raise SandboxError(
                "the local backend does not isolate (the command can read host files and use the network); "
                f"use bwrap or docker, or allow it explicitly with --allow-unsafe-local or {ALLOW_ENV}=1"
            )
        self.runtime = runtime or default_runtime()

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
        if extra_ro_binds or extra_rw_binds:
            raise SandboxError("the local backend cannot mount paths; run the command with host paths instead")
        return run_process(
            argv,
            cwd=workspace,
            env={**BASE_ENV, "PATH": self.runtime.path, **(env or {})},
            limits=limits,
            workspace=workspace,
            stdin=stdin,
            name=self.name,
        )
