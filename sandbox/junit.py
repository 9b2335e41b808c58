"""JUnit XML (pytest's xunit1 flavour) into per-test outcomes keyed by pytest node id, reconciled
with pytest's own summary: the one reader of test outcomes for validation, rollouts and scoring.

JUnit alone cannot tell everything apart: an xfail is a `skipped` of type `pytest.xfail`, a
strict XPASS a `failure` whose message starts `[XPASS(strict)]`, a collection error an `error`
"collection failure" on a pseudo test named after the module, and a non-strict XPASS a plain
pass (in xunit1 and xunit2 alike). The harness asks pytest for `-rxX`, so the short summary
names every XFAIL and XPASS; `reconcile` moves those passes to `xpassed` and reports any count
on which the summary line and the report still disagree, with the ids that differ.

pytest 9 runs sub-tests (unittest's `subTest`, the `subtests` fixture) as reports of their test:
JUnit folds them into the test's one element (a failed sub-test adds a `failure`), while the
summary line counts each of them and still counts as passed a unittest test whose sub-test
failed (its short summary names it SUBFAILED, not FAILED). A test is read by its worst report,
so a failed sub-test fails its test, and the counts are compared in those terms.

The report is written by a process the agent's code runs in, so the file may be anything
when the run ends: a FIFO (a plain open() blocks forever), a symlink to a device or a
host file, a huge file. It is read the one safe way: `read_safely`.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from pathlib import Path

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from sandbox.results import Outcome, TestOutcome

MAX_REPORT_BYTES = 32 * 1024 * 1024
READ_DEADLINE_SECONDS = 10.0
_CHUNK = 1024 * 1024
COLLECTION_FAILURE = "collection failure"
XFAIL_TYPE = "pytest.xfail"
STRICT_XPASS = "[XPASS(strict)]"
SUMMARY_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")
# pytest 9's count of passed sub-tests, beside the tests' own: "3 passed, 6 subtests passed in 0.2s".
SUBTESTS_RE = re.compile(r"(\d+) subtests passed")
SHORT_SUMMARY_HEADER = " short test summary info "
# `-rfExX` lines: "XPASS tests/test_x.py::test_y - reason" (pytest 8 and 9); pytest 9 names a
# failed sub-test "SUBFAILED tests/test_x.py::test_y - message", with its description in some versions.
SHORT_LINE = re.compile(r"^(XFAIL|XPASS|FAILED|SUBFAILED)(?:\[[^\]\n]*\])?(?: \([^)\n]*\))? (\S.*)$", re.MULTILINE)
# Categories both the summary line and the report count the same way. Errors are left out:
# pytest counts a teardown error beside the test's own pass, the report keeps the worse one.
RECONCILED = (Outcome.PASSED, Outcome.XFAILED, Outcome.XPASSED, Outcome.SKIPPED)
MAX_IDS_SHOWN = 10


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
    """pytest node id from xunit1 attributes: file=tests/test_x.py classname=tests.test_x.TestC.

    `file` is where the test function is written, `classname` the dotted node id it ran under:
    for a method inherited from a class in another module (a unittest mixin in
    tests/__init__.py) they disagree, and the node id comes from `classname` alone.
    """
    module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
    parts = [file] if file else []
    if module and (classname == module or classname.startswith(module + ".")):
        inner = classname[len(module) :].strip(".")
        if inner:
            parts += inner.split(".")
    elif module and (collected := _collected_under(classname)):
        parts = collected
    elif not file:
        parts.append(classname)
    return "::".join([*parts, name])


def _collected_under(classname: str) -> list[str]:
    """tests.sub.test_c.TestA -> [tests/sub/test_c.py, TestA]: the module's parts come first and
    the classes start at the first capitalised part (pytest collects classes named Test*,
    unittest's are TestCase subclasses, by convention capitalised; modules are not); a function
    imported from another module has no class part."""
    dotted = classname.split(".")
    for at, part in enumerate(dotted[1:], start=1):
        if part[:1].isupper():
            return ["/".join(dotted[:at]) + ".py", *dotted[at:]]
    # A function imported from another module: the classname is the collecting module alone.
    return ["/".join(dotted) + ".py"] if classname else []


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
            test = _case(case)
            previous = outcomes.get(test.nodeid)
            # pytest reports a test that fails in teardown twice; the worse outcome stands.
            if previous is None or previous.outcome == Outcome.PASSED:
                outcomes[test.nodeid] = test
    return outcomes, claimed


def _case(case: ElementTree.Element) -> TestOutcome:
    file, classname, name = case.get("file", ""), case.get("classname", ""), case.get("name", "")
    try:
        duration = float(case.get("time", "0") or 0)
    except ValueError:
        duration = 0.0
    for child, label in (("failure", Outcome.FAILED), ("error", Outcome.ERROR), ("skipped", Outcome.SKIPPED)):
        found = case.find(child)
        if found is None:
            continue
        message = (found.get("message") or "")[:500]
        if label == Outcome.ERROR and message == COLLECTION_FAILURE and not classname:
            # The pseudo test is named after the module; the file is what could not be collected.
            where = file or name.replace(".", "/") + ".py"
            return TestOutcome(where, Outcome.COLLECTION_ERROR, duration, _text(found))
        node = nodeid(file, classname, name)
        if label == Outcome.SKIPPED and found.get("type") == XFAIL_TYPE:
            return TestOutcome(node, Outcome.XFAILED, duration, message, xfail=True)
        if label == Outcome.FAILED and message.startswith(STRICT_XPASS):
            return TestOutcome(node, Outcome.FAILED, duration, message, xfail=True)
        return TestOutcome(node, label, duration, message)
    return TestOutcome(nodeid(file, classname, name), Outcome.PASSED, duration)


def _text(element: ElementTree.Element) -> str:
    """The last lines of an error's text: for a collection error, the exception that stopped it."""
    lines = (element.text or element.get("message") or "").strip().splitlines()
    return "\n".join(lines[-3:])[:500]


def _counts_line(stdout: str) -> str:
    """pytest's last summary line ("3 passed, 1 xpassed in 0.2s"), or "" without one."""
    lines = [line for line in stdout.strip().splitlines() if " in " in line and SUMMARY_RE.search(line)]
    return lines[-1] if lines else ""


def summary_counts(stdout: str) -> dict[str, int] | None:
    """The counts of pytest's last summary line ("3 passed, 1 xpassed in 0.2s"), or None without one."""
    line = _counts_line(stdout)
    if not line:
        return None
    counts: dict[str, int] = {}
    for number, word in SUMMARY_RE.findall(line):
        counts["error" if word.startswith("error") else word] = int(number)
    return counts


def short_summary(stdout: str, known: set[str]) -> dict[str, set[str]]:
    """Node ids the short summary's lines name, by XFAIL / XPASS / FAILED / SUBFAILED.

    A node id may hold spaces (a parametrised id), so each line is matched against the
    report's ids first; a line naming none of them keeps the text before its " - reason".
    """
    named: dict[str, set[str]] = {"XFAIL": set(), "XPASS": set(), "FAILED": set(), "SUBFAILED": set()}
    # Only pytest's own section counts, the one just above its last line: what the code under
    # test printed elsewhere is not pytest speaking.
    section = stdout.rpartition(SHORT_SUMMARY_HEADER)[2] if SHORT_SUMMARY_HEADER in stdout else ""
    for kind, rest in SHORT_LINE.findall(section):
        node = rest if rest in known else next((n for n in known if rest.startswith(n + " ")), "")
        named[kind].add(node or rest.split(" - ")[0].strip())
    return named


def has_subtests(stdout: str) -> bool:
    """Whether pytest's summary counts sub-tests: passed ones on its last line, failed ones named SUBFAILED."""
    section = stdout.rpartition(SHORT_SUMMARY_HEADER)[2] if SHORT_SUMMARY_HEADER in stdout else ""
    return bool(SUBTESTS_RE.search(_counts_line(stdout)) or re.search(r"^SUBFAILED", section, re.MULTILINE))


def reconcile(tests: dict[str, TestOutcome], stdout: str) -> list[str]:
    """Move summary-named XPASSes to `xpassed`; then every count on which report and summary disagree.

    Each problem names both counts and the ids that differ, so a disagreement is read, never guessed.
    """
    counts = summary_counts(stdout)
    if counts is None or not tests:
        return []
    named = short_summary(stdout, set(tests))
    for node in named["XPASS"] & set(tests):
        if tests[node].outcome == Outcome.PASSED:
            tests[node].outcome, tests[node].xfail = Outcome.XPASSED, True
    expected = _expected_counts(tests, counts, named) if has_subtests(stdout) else {}
    problems = []
    for category in RECONCILED:
        ids = sorted(n for n, t in tests.items() if t.outcome == category)
        said = counts.get(category, 0)
        low, high = expected.get(category, (said, said))
        if low <= len(ids) <= high:
            continue
        problem = f"pytest's summary says {said} {category}, the report {len(ids)}"
        if category in expected:
            problem += f" (with its sub-tests, the report should have {low} to {high})"
        listed = named.get({Outcome.XFAILED: "XFAIL", Outcome.XPASSED: "XPASS"}.get(category, ""))
        if listed is not None:
            differ = sorted(set(ids) ^ listed)
            problem += f" (ids that differ: {', '.join(differ[:MAX_IDS_SHOWN]) or 'none named by -rxX'})"
        problems.append(problem)
    return problems


def _expected_counts(
    tests: dict[str, TestOutcome], counts: dict[str, int], named: dict[str, set[str]]
) -> dict[str, tuple[int, int]]:
    """The range of passed and skipped tests the report may hold when the summary counts sub-tests.

    The summary's `passed` counts a unittest test whose sub-test failed (SUBFAILED, not FAILED):
    the report fails it. Its `skipped` counts every skipped sub-test, and a test that skipped one
    and then passed is skipped in the report (JUnit keeps no trace of the pass): so up to that
    many of the summary's passes are the report's skips.
    """
    failed_by_subtest = {n for n in named["SUBFAILED"] - named["FAILED"] if n in tests}
    said_passed, said_skipped = counts.get(Outcome.PASSED, 0), counts.get(Outcome.SKIPPED, 0)
    skipped = sum(t.outcome == Outcome.SKIPPED for t in tests.values())
    passed = said_passed - len(failed_by_subtest)
    return {Outcome.PASSED: (passed - min(skipped, said_skipped), passed), Outcome.SKIPPED: (0, said_skipped)}


def claim_problem(claimed: int, tests: dict[str, TestOutcome], stdout: str) -> str:
    """Why the report's own count of tests does not fit the tests it lists ('' when it does).

    pytest 9 counts each sub-test's report in that count too: then it may exceed the tests
    listed, up to every report the summary line counts.
    """
    if not tests or claimed == len(tests):
        return ""
    line = _counts_line(stdout)
    reports = sum(int(n) for n, _ in SUMMARY_RE.findall(line)) + sum(int(n) for n in SUBTESTS_RE.findall(line))
    if has_subtests(stdout) and len(tests) < claimed <= reports:
        return ""
    return f"the report claims {claimed} tests but lists {len(tests)}"
