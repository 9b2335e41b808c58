"""JUnit XML (pytest's xunit1 flavour) into per-test outcomes keyed by pytest node id.

The report is written by a process the agent's code runs in, so the file may be anything
when the run ends: a FIFO (a plain open() blocks forever), a symlink to a device or a
host file, a huge file. It is read the one safe way: `read_safely`.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from sandbox.results import TestOutcome

MAX_REPORT_BYTES = 32 * 1024 * 1024
READ_DEADLINE_SECONDS = 10.0
_CHUNK = 1024 * 1024


class ReportError(ValueError):
    """No report, or one that is not a JUnit report: the run cannot be believed."""


class UnsafeReport(ReportError):
    """The report's path holds something other than a small regular file (a trap for the reader)."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return f"a special file (mode {mode:o})"


def read_safely(
    path: Path, max_bytes: int = MAX_REPORT_BYTES, deadline_seconds: float = READ_DEADLINE_SECONDS
) -> bytes | None:
    """The bytes of a regular file the sandbox wrote, or None when there is none.

    Never follows a symlink (O_NOFOLLOW), never waits for a writer (O_NONBLOCK: a FIFO
    opens at once and is then refused by fstat), never reads past `max_bytes`, never
    reads for longer than `deadline_seconds`. Anything else raises UnsafeReport.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeReport(f"{path.name} is a symlink") from None
        # ENXIO: a socket; EACCES: made unreadable. Either way not a report to trust.
        raise UnsafeReport(f"{path.name} cannot be opened safely: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeReport(f"{path.name} is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise UnsafeReport(f"{path.name} is {info.st_size} bytes, over the {max_bytes}-byte limit")
        deadline = time.monotonic() + deadline_seconds
        data = bytearray()
        while True:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - len(data)))
            if not chunk:
                return bytes(data)
            data += chunk
            if len(data) > max_bytes:
                raise UnsafeReport(f"{path.name} grew past the {max_bytes}-byte limit while it was read")
            if time.monotonic() > deadline:
                raise UnsafeReport(f"{path.name} took over {deadline_seconds:g} s to read")
    finally:
        os.close(fd)


def nodeid(file: str, classname: str, name: str) -> str:
    """pytest node id from xunit1 attributes: file=tests/test_x.py classname=tests.test_x.TestC."""
    module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
    parts = [file] if file else []
    if module and classname.startswith(module):
        inner = classname[len(module) :].strip(".")
        if inner:
            parts += inner.split(".")
    elif not file:
        parts.append(classname)
    return "::".join([*parts, name])


def read_report(path: Path) -> tuple[dict[str, TestOutcome], int]:
    """(outcomes by node id, the count the report claims) from the report at `path`, read safely."""
    data = read_safely(path)
    if data is None:
        raise ReportError("no JUnit report was written")
    return parse(data)


def parse(data: bytes) -> tuple[dict[str, TestOutcome], int]:
    """(outcomes by node id, the count the report claims) from a report's bytes."""
    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, DefusedXmlException) as exc:
        raise ReportError(f"the JUnit report is not valid XML: {exc}") from None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    outcomes: dict[str, TestOutcome] = {}
    claimed = 0
    for suite in suites:
        try:
            claimed += int(suite.get("tests", "0") or 0)
        except ValueError:
            raise ReportError(f"the JUnit report claims {suite.get('tests')!r} tests") from None
        for case in suite.iter("testcase"):
            node = nodeid(case.get("file", ""), case.get("classname", ""), case.get("name", ""))
            outcome, message = "passed", ""
            for child, label in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                found = case.find(child)
                if found is not None:
                    outcome, message = label, (found.get("message") or "")[:500]
                    break
            try:
                duration = float(case.get("time", "0") or 0)
            except ValueError:
                duration = 0.0
            previous = outcomes.get(node)
            # pytest reports a test that fails in teardown twice; the worse outcome stands.
            if previous is None or previous.outcome == "passed":
                outcomes[node] = TestOutcome(node, outcome, duration, message)
    return outcomes, claimed
