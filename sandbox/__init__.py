"""Sandboxed execution for agents and verifiers. Plain Python: imports nothing from Django.

The names below load on first use (PEP 562): a process that needs only `sandbox.names` (the
static scan's child, through core.vocabulary) does not import the backends, the runtime and
`packaging`, 130 ms of each such process's start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.backends.base import SandboxError
    from sandbox.core import Sandbox, make_backend, reap_orphans
    from sandbox.limits import Limits
    from sandbox.paths import ToolError
    from sandbox.results import ExecResult, TestOutcome, TestReport

_WHERE = {
    "ExecResult": "sandbox.results",
    "Limits": "sandbox.limits",
    "Sandbox": "sandbox.core",
    "SandboxError": "sandbox.backends.base",
    "TestOutcome": "sandbox.results",
    "TestReport": "sandbox.results",
    "ToolError": "sandbox.paths",
    "make_backend": "sandbox.core",
    "reap_orphans": "sandbox.core",
}
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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups find it without this function
    return value
