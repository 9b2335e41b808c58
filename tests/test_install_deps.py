"""`make setup` installs the lock with uv where it can, pip's configuration passed on, and with pip
otherwise (scripts/install_deps.sh). The installers are stand-ins that record how they were called."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

FAKE_PIP = """#!/usr/bin/env bash
echo "pip $*" >> "$CALLS"
if [ "$1" = config ]; then
  echo "global.find-links='$WHEELS'"
  echo ":env:.find-links='$WHEELS'"
  echo "global.extra-index-url='file://$WHEELS file:///no/such/index https://mirror.example/simple'"
  echo "global.constraint='$CONSTRAINTS'"
  echo "site.constraint='/no/such/constraints.txt'"
  exit 0
fi
echo "Collecting six"
exit "${PIP_EXIT:-0}"
"""
FAKE_UV = """#!/usr/bin/env bash
echo "uv $*" >> "$CALLS"
exit "${UV_EXIT:-0}"
"""


def install(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir, wheels = tmp_path / "bin", tmp_path / "wheels"
    for directory in (bin_dir, wheels):
        directory.mkdir(exist_ok=True)
    (tmp_path / "constraints.txt").write_text("torch<=2.14.1\n")
    for name, text in (("pip", FAKE_PIP), ("uv", FAKE_UV)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls"
    calls.write_text("")
    done = subprocess.run(
        ["bash", "scripts/install_deps.sh", str(bin_dir), "requirements/lock.txt"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={
            **os.environ,
            "CALLS": str(calls),
            "WHEELS": str(wheels),
            "CONSTRAINTS": str(tmp_path / "constraints.txt"),
            **env,
        },
    )
    return done, calls.read_text().splitlines()


def test_uv_installs_the_lock_with_pips_wheel_folders_indexes_and_constraints(tmp_path: Path) -> None:
    done, calls = install(tmp_path)
    assert done.returncode == 0, done.stderr
    uv = [call for call in calls if call.startswith("uv ")]
    assert len(uv) == 1 and not any(call.startswith("pip install") for call in calls)
    args = uv[0].split()
    assert args[:3] == ["uv", "pip", "install"] and "--compile-bytecode" in args
    assert args[-2:] == ["-r", "requirements/lock.txt"]
    given = [arg for arg in args if arg.startswith(("--find-links", "--extra-index-url", "--constraint"))]
    # What exists (or is remote) is passed on once; folders and files that do not exist are not.
    assert given == [
        f"--find-links={tmp_path / 'wheels'}",
        f"--extra-index-url=file://{tmp_path / 'wheels'}",
        "--extra-index-url=https://mirror.example/simple",
        f"--constraint={tmp_path / 'constraints.txt'}",
    ]
    assert "--index-strategy" in args and "unsafe-best-match" in args  # the best match over indexes, as pip


@pytest.mark.parametrize(
    ("env", "says"), [({"UV_EXIT": "2"}, "uv could not install the lock"), ({"CRUCIBLE_PIP": "1"}, "")]
)
def test_pip_installs_the_lock_when_uv_fails_or_is_not_wanted(tmp_path: Path, env: dict[str, str], says: str) -> None:
    done, calls = install(tmp_path, **env)
    assert done.returncode == 0, done.stderr
    assert calls[-1] == "pip install --disable-pip-version-check -r requirements/lock.txt"
    assert "Collecting six" in done.stdout and says in done.stdout
    assert any(call.startswith("uv ") for call in calls) == ("UV_EXIT" in env)


def test_a_failed_install_fails_setup(tmp_path: Path) -> None:
    done, _ = install(tmp_path, UV_EXIT="1", PIP_EXIT="3")
    assert done.returncode == 3
