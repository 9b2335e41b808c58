"""`make setup` shows its progress: numbered phases with their times (scripts/phase.sh), a model that is
converted once and then skipped at once."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from scripts.fetch_model import write_marker

REPO = Path(__file__).resolve().parent.parent


def phase(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/phase.sh", *args], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
    )


def test_a_phase_prints_its_number_then_its_command_output_then_its_time() -> None:
    done = phase("2", "6", "Python dependencies (pip, 3 packages)", "bash", "-c", "echo Collecting six; sleep 0.2")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == "[2/6] Python dependencies (pip, 3 packages)…"
    assert lines[1] == "Collecting six"  # the command's own progress, not hidden
    assert re.fullmatch(r"\[2/6\] Python dependencies \(pip, 3 packages\)… 0\.[2-9]s", lines[2])


def test_a_failed_phase_says_so_and_keeps_the_exit_status() -> None:
    failed = phase("4", "6", "Database migrations", "bash", "-c", "exit 3")
    assert failed.returncode == 3
    assert failed.stdout.splitlines() == ["[4/6] Database migrations…"]
    assert re.fullmatch(r"\[4/6\] Database migrations… failed after 0\.\ds \(exit 3\)\n", failed.stderr)


def test_make_setup_runs_six_numbered_phases() -> None:
    dry = subprocess.run(
        ["make", "-n", "setup"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    numbers = [int(n) for n in re.findall(r"^bash scripts/phase\.sh (\d) 6 ", dry, re.MULTILINE)]
    assert numbers == [1, 2, 3, 4, 5, 6]
    assert "pip install -q" not in Path(REPO / "Makefile").read_text()  # pip's progress is shown


def test_a_converted_model_is_skipped_at_once_and_says_its_size(tmp_path: Path) -> None:
    dest = tmp_path / "model"
    dest.mkdir()
    (dest / "model.safetensors").write_bytes(b"\0" * 3_000_000)
    write_marker(dest, "0" * 64)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "scripts/fetch_model.py", "--dest", str(dest)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert time.monotonic() - started < 5  # no torch, no pip
    assert done.stdout == f"model already converted: {dest} (3 MB)\n"
