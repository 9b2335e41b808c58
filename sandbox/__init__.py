"""Sandboxed execution for agents and verifiers. Plain Python: imports nothing from Django."""

from __future__ import annotations

from sandbox.backends.base import SandboxError
from sandbox.core import Sandbox, make_backend, reap_orphans
from sandbox.limits import Limits
from sandbox.paths import ToolError
from sandbox.results import ExecResult, TestOutcome, TestReport

__all__ = [
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxError",
    "TestOutcome",
    "TestReport",
    "ToolError",
    "make_backend",
    "reap_orphans",
]
