"""The JUnit report is written by a process the agent's code runs in: it is read without trusting
what is at its path. A FIFO, a symlink, a device, a socket or a huge file is refused at once,
named in `report.unsafe`, and never blocks the host.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox import Sandbox
from sandbox.junit import ReportError, UnsafeReport, parse, read_report, read_safely
from tests.sandbox.conftest import DEMO_TASK, SMALL

GOOD = b'<testsuites><testsuite tests="1"><testcase file="t.py" classname="t" name="test_a"/></testsuite></testsuites>'


def test_a_regular_file_is_read_and_a_missing_one_is_none(tmp_path: Path) -> None:
    (tmp_path / "report.xml").write_bytes(GOOD)
    assert read_safely(tmp_path / "report.xml") == GOOD
    assert read_safely(tmp_path / "absent.xml") is None
    tests, claimed = read_report(tmp_path / "report.xml")
    assert list(tests) == ["t.py::test_a"] and claimed == 1


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _symlink_to_file(path: Path) -> Path:
    (path.parent / "real.xml").write_bytes(GOOD)
    path.symlink_to(path.parent / "real.xml")
    return path


def _symlink_to_fifo(path: Path) -> Path:
    os.mkfifo(path.parent / "pipe")
    path.symlink_to(path.parent / "pipe")
    return path


def _symlink_to_zero(path: Path) -> Path:
    path.symlink_to("/dev/zero")
    return path


def _directory(path: Path) -> Path:
    path.mkdir()
    return path


def _socket(path: Path) -> Path:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()
    return path


TRAPS = {
    "a FIFO": (_fifo, "is a FIFO"),
    "a symlink to a regular file": (_symlink_to_file, "is a symlink"),
    "a symlink to a FIFO": (_symlink_to_fifo, "is a symlink"),
    "a symlink to /dev/zero": (_symlink_to_zero, "is a symlink"),
    "a directory": (_directory, "is a directory"),
    "a socket": (_socket, "cannot be opened safely"),
}


@pytest.mark.parametrize("trap", TRAPS, ids=list(TRAPS))
def test_a_trap_at_the_report_path_is_refused_at_once(tmp_path: Path, trap: str) -> None:
    make, message = TRAPS[trap]
    path = make(tmp_path / "report.xml")
    started = time.monotonic()
    with pytest.raises(UnsafeReport, match=message):
        read_safely(path)
    with pytest.raises(UnsafeReport):
        read_report(path)
    assert time.monotonic() - started < 1


def test_a_fifo_with_a_writer_that_never_writes_does_not_block_either(tmp_path: Path) -> None:
    path = _fifo(tmp_path / "report.xml")
    opened = threading.Event()

    def hold_open() -> None:
        fd = os.open(path, os.O_RDWR)  # a writer that keeps the pipe open and says nothing
        opened.set()
        time.sleep(3)
        os.close(fd)

    writer = threading.Thread(target=hold_open, daemon=True)
    writer.start()
    assert opened.wait(5)
    started = time.monotonic()
    with pytest.raises(UnsafeReport, match="is a FIFO"):
        read_safely(path)
    assert time.monotonic() - started < 1


def test_an_oversized_report_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "report.xml"
    with path.open("wb") as fh:
        fh.truncate(64 * 1024 * 1024)  # sparse: costs no disk
    with pytest.raises(UnsafeReport, match="over the 33554432-byte limit"):
        read_safely(path)
    path.write_bytes(b"x" * 2000)
    with pytest.raises(UnsafeReport, match="over the 1000-byte limit"):
        read_safely(path, max_bytes=1000)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_report_is_unsafe_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "report.xml"
    path.write_bytes(GOOD)
    path.chmod(0)
    with pytest.raises(UnsafeReport, match="cannot be opened safely"):
        read_safely(path)


@pytest.mark.parametrize(
    "data",
    [
        b"not xml",
        b'<testsuite tests="many"></testsuite>',
        b"<!DOCTYPE x [<!ENTITY a 'aaaa'>]><testsuite>&a;</testsuite>",
    ],
)
def test_a_malformed_report_is_an_error_never_a_crash(data: bytes) -> None:
    with pytest.raises(ReportError):
        parse(data)


def test_a_bad_duration_does_not_lose_the_outcome() -> None:
    tests, _ = parse(
        b'<testsuite tests="1"><testcase file="t.py" classname="t" name="test_a" time="soon"/></testsuite>'
    )
    assert tests["t.py::test_a"].outcome == "passed" and tests["t.py::test_a"].duration_s == 0.0


# --- in a real sandbox: code under test sets the trap at exit ------------------------------------

FIFO_AT_EXIT = """
import atexit, os, sys

def _trap():
    for arg in sys.argv:
        if arg.startswith("--junitxml="):
            path = arg.split("=", 1)[1]
            os.unlink(path)
            os.mkfifo(path)

atexit.register(_trap)
"""
ZERO_AT_EXIT = """
import atexit, glob, os

def _trap():
    for path in glob.glob("/run/*/report.xml"):
        os.unlink(path)
        os.symlink("/dev/zero", path)

atexit.register(_trap)
"""
HUGE_AT_EXIT = """
import atexit, glob

def _trap():
    for path in glob.glob("/run/*/report.xml"):
        with open(path, "r+b") as fh:
            fh.truncate(40 * 1024 * 1024)

atexit.register(_trap)
"""


@pytest.mark.parametrize(
    ("trap", "message"),
    [(FIFO_AT_EXIT, "is a FIFO"), (ZERO_AT_EXIT, "is a symlink"), (HUGE_AT_EXIT, "over the 33554432-byte limit")],
    ids=["FIFO via sys.argv", "symlink to /dev/zero via /run", "oversized"],
)
def test_a_run_that_leaves_a_trap_for_the_report_returns_promptly_and_is_unsafe(
    repo: Path, trap: str, message: str
) -> None:
    # A 40 MB sparse report needs a file size limit above it (SMALL's is 16 MB).
    limits = replace(SMALL, wall_seconds=20, file_size_mb=64)
    with Sandbox(repo, limits=limits) as box:
        shutil.copytree(DEMO_TASK / "tests", box.workspace / "tests", dirs_exist_ok=True)
        (box.workspace / "configkit" / "__init__.py").write_text(
            (box.workspace / "configkit" / "__init__.py").read_text() + trap
        )
        started = time.monotonic()
        report = box.run_tests(["tests/test_values.py"])
        assert time.monotonic() - started < 20 + 10
    assert message in report.unsafe, (report.unsafe, report.inconsistencies, report.exec.stderr[-2000:])
    assert not report.valid and not report.tests
    assert not any("no tests were reported" in p for p in report.inconsistencies)
