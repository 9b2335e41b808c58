"""Per-sandbox and per-run directories are private (0700), fresh, and never taken over.

Another local user who could predict, pre-create or link a report folder could read the
hidden tests' results, or plant the report that scoring believes.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

import pytest

from sandbox import Sandbox
from sandbox.backends.base import SandboxError
from sandbox.private import private_dir

# Records, from inside the sandbox, the mode of the folder its report goes to.
MODE_PROBE = """
import json, os, stat

def pytest_sessionfinish(session, exitstatus):
    out = os.environ["CRUCIBLE_HARNESS_OUT"]
    with open(out, "w") as fh:
        json.dump({"mode": stat.S_IMODE(os.stat(os.path.dirname(out)).st_mode)}, fh)
"""


def test_every_test_run_writes_its_report_into_a_fresh_private_folder(box: Sandbox) -> None:
    for _ in range(2):
        report = box.run_tests(["tests/test_values.py"], plugins=[("crucible_mode_probe", MODE_PROBE)])
        assert report.harness == {"mode": 0o700}
        assert report.tests and not report.unsafe
    assert stat.S_IMODE(box.root.stat().st_mode) == 0o700
    # Each run's folder is gone afterwards: nothing is left to be reused by the next one.
    assert [p.name for p in box.root.iterdir()] == ["workspace"]


@pytest.fixture
def predictable_names(monkeypatch: pytest.MonkeyPatch) -> str:
    """Forces the one name an attacker would need to guess (96 random bits in real use)."""
    monkeypatch.setattr(secrets, "token_hex", lambda nbytes=None: "guessed")
    return "run-guessed"


def test_a_link_planted_where_a_run_folder_goes_is_refused(
    box: Sandbox, tmp_path: Path, predictable_names: str
) -> None:
    attacker = tmp_path / "attacker"
    attacker.mkdir(mode=0o777)
    (box.root / predictable_names).symlink_to(attacker, target_is_directory=True)
    with pytest.raises(SandboxError, match="already exists; refusing to reuse"):
        box.run_tests(["tests/test_values.py"])
    assert list(attacker.iterdir()) == []


def test_a_folder_someone_else_made_where_a_run_folder_goes_is_refused(box: Sandbox, predictable_names: str) -> None:
    planted = box.root / predictable_names
    planted.mkdir()
    planted.chmod(0o777)
    if os.geteuid() == 0:
        os.chown(planted, 4242, 4242)
    with pytest.raises(SandboxError, match="already exists; refusing to reuse"):
        box.run_tests(["tests/test_values.py"])
    assert list(planted.iterdir()) == []


def test_a_private_dir_is_0700_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o277)  # would leave mkdir's 0700 as 0500
    try:
        made = private_dir(tmp_path, "run")
    finally:
        os.umask(old)
    info = made.lstat()
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()
    with pytest.raises(SandboxError, match="already exists"):
        private_dir(tmp_path, "run")
