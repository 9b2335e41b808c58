"""The sandbox package loads its parts on first use: a child that needs only its names starts fast."""

from __future__ import annotations

import subprocess
import sys

import pytest

import sandbox
from sandbox import Sandbox
from sandbox.core import Sandbox as CoreSandbox


def test_the_static_scans_child_does_not_import_the_backends() -> None:
    # rewards.anticheat.bounded runs once per scored patch; the backends, the runtime and
    # `packaging` were 130 ms of its start.
    heavy = "['sandbox.core', 'packaging']"
    code = f"import sys, rewards.anticheat.bounded; print([m for m in {heavy} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_packages_names_are_the_modules_own() -> None:
    assert Sandbox is CoreSandbox
    assert sorted(sandbox.__all__) == sorted(n for n in sandbox.__all__ if getattr(sandbox, n) is not None)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        sandbox.Nothing  # noqa: B018
