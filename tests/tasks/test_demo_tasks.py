"""The demo tasks are real tasks: hidden tests fail before the expected patch and pass after."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import DEMO


def test_every_demo_task_fails_before_and_passes_after_its_expected_patch() -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO / "check_tasks.py"), "--python", sys.executable],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "23 of 23 tasks valid" in done.stdout
