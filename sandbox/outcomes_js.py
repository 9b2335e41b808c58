"""Jest's and Vitest's JUnit XML into per-test outcomes keyed "<file>::<describe> > ... > <test>",
reconciled with the runner's own JSON summary; what disagrees is reported beside them as problems.

The file is the test file's path relative to the runner's root, as the XML spells it; the rest is
the describe blocks and the test's title joined by " > " (a title that itself holds " > " cannot
be told from nesting). Jest's XML comes from jest-junit with the file attribute on and the
templates that keep the describe path apart (JEST_ENV below); Vitest's from its built-in junit
reporter, whose classname is the file and whose name is already the joined path.

Neither XML tells everything apart: jest-junit writes a todo as a bare (passing) testcase, Vitest
as a skip; a file that failed to load, or a throwing afterAll, is a pseudo testcase
named after the file or the hook. So the JSON summary (`--json --outputFile`, Vitest's json
reporter) decides which tests are todo and which files failed as a whole, and every id, count
and the exit status must agree between the two; where an id's outcomes differ the worse stands.

Both files are written by a process the agent's code runs in: they are read with `read_safely`
and parsed with defusedxml (no entities, no DTD tricks), and nothing they claim is trusted alone.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from sandbox.junit import MAX_IDS_SHOWN, ReportError, read_safely
from sandbox.results import Outcome, TestOutcome

MAX_MESSAGE_CHARS = 500
MAX_PATH_CHARS = 4096
SEPARATOR = " > "
TODO = "todo"
NOT_SUMMARISED = "not in the runner's JSON summary"
# How the harness runs jest-junit so that its XML can be read here.
JEST_ENV = {
    "JEST_JUNIT_CLASSNAME": "{classname}",
    "JEST_JUNIT_TITLE": "{title}",
    "JEST_JUNIT_ANCESTOR_SEPARATOR": SEPARATOR,
    "JEST_JUNIT_ADD_FILE_ATTRIBUTE": "true",
    "JEST_JUNIT_REPORT_TEST_SUITE_ERRORS": "true",
}
# Assertion statuses of the JSON summary (Jest says pending for a skip, Vitest skipped).
STATUS = {
    "passed": Outcome.PASSED,
    "failed": Outcome.FAILED,
    "pending": Outcome.SKIPPED,
    "skipped": Outcome.SKIPPED,
    "disabled": Outcome.SKIPPED,
    TODO: TODO,
}
RANK: dict[str, int] = {Outcome.PASSED: 0, TODO: 1, Outcome.SKIPPED: 1, Outcome.ERROR: 2, Outcome.FAILED: 3}
# The summary's counts, by the category each one counts.
COUNTS = {
    "numPassedTests": Outcome.PASSED,
    "numFailedTests": Outcome.FAILED,
    "numPendingTests": Outcome.SKIPPED,
    "numTodoTests": TODO,
}
FAILING = (Outcome.FAILED, Outcome.ERROR, Outcome.COLLECTION_ERROR)
# Characters XML 1.0 cannot hold (C0 controls but tab, newline, return; U+FFFE, U+FFFF) or
# discourages: Vitest's reporter removes them from its XML, jest-junit writes them raw (a title such
# as `parse("\b")`, which no XML parser takes). They are removed from the XML's bytes before it is
# parsed and from every title that makes an id, in both reports, so both runners spell ids alike.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufdd0-\ufdef\ufffe\uffff]")
_NOT_XML_BYTES = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]|\xef\xbf[\xbe\xbf]")


class JsRunner(StrEnum):
    JEST = "jest"
    VITEST = "vitest"


@dataclass
class _Case:
    node: str
    outcome: str
    duration: float
    message: str


@dataclass
class _Summary:
    statuses: dict[str, str]  # id -> the worst category the summary gives it
    counts: dict[str, int]
    broken: dict[str, tuple[bool, str]]  # file -> (whether any of its tests ran, why it failed)
    success: bool | None


def read_js_report(
    xml_path: Path, summary_path: Path, exit_code: int | None, runner: JsRunner
) -> tuple[dict[str, TestOutcome], list[str]]:
    """(outcomes by id, problems) from the JUnit XML and the JSON summary a run left, read safely."""
    xml, summary = read_safely(xml_path), read_safely(summary_path)
    if xml is None or summary is None:
        raise ReportError(f"no {'JUnit report' if xml is None else 'JSON summary'} was written")
    return parse_js(xml, summary, exit_code, runner)


def parse_js(
    xml: bytes, summary: bytes, exit_code: int | None, runner: JsRunner
) -> tuple[dict[str, TestOutcome], list[str]]:
    """(outcomes by id, problems) from the two reports' bytes and the runner's exit status."""
    cases = _xml_cases(xml, runner)
    said = _summary(summary, {c.node.partition("::")[0] for c in cases})
    problems: list[str] = []
    # A file that failed as a whole: its pseudo testcases (named after it or its hook) are that failure.
    cases = [c for c in cases if c.node in said.statuses or c.node.partition("::")[0] not in said.broken]
    for case in cases:
        if said.statuses.get(case.node) == TODO and case.outcome in (Outcome.PASSED, Outcome.SKIPPED):
            case.outcome, case.message = TODO, TODO
    tests: dict[str, TestOutcome] = {}
    for case in cases:
        test = _reconciled(case, said.statuses.get(case.node))
        # A title used twice in one file is one id: the worse of its outcomes stands.
        if case.node not in tests or RANK[_category(tests[case.node])] < RANK[_category(test)]:
            tests[case.node] = test
    problems += _id_problems(cases, said)
    problems += _count_problems(cases, said)
    for file, (ran, why) in said.broken.items():
        tests[file] = TestOutcome(file, Outcome.ERROR if ran else Outcome.COLLECTION_ERROR, 0.0, why)
    problems += _exit_problems(tests, said, exit_code)
    return tests, problems


def _category(test: TestOutcome) -> str:
    return TODO if test.outcome == Outcome.SKIPPED and test.message == TODO else test.outcome


def _reconciled(case: _Case, claimed: str | None) -> TestOutcome:
    """The worse of what the XML and the summary say of one test; one the summary never ran is an error."""
    if claimed is None:
        worst, message = max(case.outcome, Outcome.ERROR, key=RANK.__getitem__), NOT_SUMMARISED
    elif RANK[claimed] > RANK[case.outcome]:
        worst, message = claimed, f"the JSON summary says {claimed}, the JUnit report {case.outcome}"
    else:
        worst, message = case.outcome, case.message
    if worst == TODO:
        return TestOutcome(case.node, Outcome.SKIPPED, case.duration, TODO)
    return TestOutcome(case.node, worst, case.duration, message)


def _xml_cases(xml: bytes, runner: JsRunner) -> list[_Case]:
    try:
        root = ElementTree.fromstring(_NOT_XML_BYTES.sub(b"", xml))
    except (ElementTree.ParseError, DefusedXmlException) as exc:
        raise ReportError(f"the JUnit report is not valid XML: {exc}") from None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    return [_case(case, runner) for suite in suites for case in suite.iter("testcase")]


def _case(case: ElementTree.Element, runner: JsRunner) -> _Case:
    classname, name = _NOT_XML.sub("", case.get("classname", "")), _NOT_XML.sub("", case.get("name", ""))
    if runner == JsRunner.JEST:
        file = case.get("file")
        if not file:
            raise ReportError("a jest-junit testcase has no file attribute (JEST_JUNIT_ADD_FILE_ATTRIBUTE)")
        path = f"{classname}{SEPARATOR}{name}" if classname else name
    else:
        file, path = classname, name
    try:
        duration = max(float(case.get("time", "0") or 0), 0.0)
    except ValueError:
        duration = 0.0
    for child, outcome in (("failure", Outcome.FAILED), ("error", Outcome.FAILED), ("skipped", Outcome.SKIPPED)):
        found = case.find(child)
        if found is not None:
            message = (found.get("message") or found.text or "").strip()
            return _Case(f"{file}::{path}", outcome, duration, message[:MAX_MESSAGE_CHARS])
    return _Case(f"{file}::{path}", Outcome.PASSED, duration, "")


def _summary(data: bytes, xml_files: set[str]) -> _Summary:
    """The JSON summary's ids, counts and files that failed as a whole; its shape checked, not assumed."""
    try:
        summary = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ReportError(f"the JSON summary is not JSON: {exc}") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("testResults"), list):
        raise ReportError("the JSON summary has no testResults list")
    counts = {key: summary.get(key) for key in [*COUNTS, "numTotalTests"]}
    checked = {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    if len(checked) < len(counts):
        raise ReportError(f"the JSON summary's counts are not counts: {repr(counts)[:MAX_MESSAGE_CHARS]}")
    success = summary.get("success")
    said = _Summary({}, checked, {}, success if isinstance(success, bool) else None)
    results = summary["testResults"]
    if not all(isinstance(r, dict) and isinstance(r.get("assertionResults"), list) for r in results):
        raise ReportError("a JSON summary test result has no assertionResults list")
    files = _files([str(r.get("name", "")) for r in results], xml_files)
    for result in results:
        file = files[str(result.get("name", ""))]
        titled = [a for a in result["assertionResults"] if isinstance(a, dict) and isinstance(a.get("title"), str)]
        for assertion in titled:
            titles = [str(t) for t in assertion.get("ancestorTitles") or [] if isinstance(t, str)]
            node = f"{file}::{_NOT_XML.sub('', SEPARATOR.join([*titles, assertion['title']]))}"
            status = STATUS.get(str(assertion.get("status")), Outcome.ERROR)
            said.statuses[node] = max(said.statuses.get(node, status), status, key=RANK.__getitem__)
        failing = any(STATUS.get(str(a.get("status"))) == Outcome.FAILED for a in titled)
        if result.get("status") == "failed" and not failing:
            said.broken[file] = (bool(titled), _file_message(result))
    return said


def _files(names: list[str], xml_files: set[str]) -> dict[str, str]:
    """Each of the JSON's absolute paths as the XML spells it: the longest XML path it ends with.

    A file the XML does not name (jest-junit leaves out a file that failed to load unless asked to
    report it) is made relative to the root the named ones share, when they share one.
    """
    found: dict[str, str] = {}
    for name in names:
        if len(name) > MAX_PATH_CHARS:
            found[name] = ""
            continue
        # Only a path's own suffixes are looked up: a hostile list of files costs its length, no more.
        starts = [0, *(at + 1 for at, char in enumerate(name) if char == "/")]
        found[name] = next((name[at:] for at in starts if name[at:] in xml_files), "")
    roots = {name[: len(name) - len(file)] for name, file in found.items() if file}
    root = roots.pop() if len(roots) == 1 else ""
    return {name: file or name.removeprefix(root) for name, file in found.items()}


def _file_message(result: dict[str, Any]) -> str:
    error = result.get("testExecError")
    text = result.get("message") or (error.get("message") if isinstance(error, dict) else "") or "the file failed"
    return str(text).strip()[:MAX_MESSAGE_CHARS]


def _id_problems(cases: list[_Case], said: _Summary) -> list[str]:
    """Ids on which the XML and the summary disagree: listed by one only, or given other outcomes.

    A title used twice in one file (`it.each` cases whose titles interpolate alike) is one id with
    several results. Each side's worst result for the id is compared, as the summary's statuses
    are kept: comparing every XML case with the summary's worst would call a passing twin of a
    failing case a disagreement and distrust an honest run (tough-cookie's two timing tests titled
    alike: under load one fails). How many results each side has is the counts' check.
    """
    xml_worst: dict[str, str] = {}
    for case in cases:
        xml_worst[case.node] = max(xml_worst.get(case.node, case.outcome), case.outcome, key=RANK.__getitem__)
    differ = {node for node, worst in xml_worst.items() if said.statuses.get(node, worst) != worst}
    problems = []
    for what, ids in (
        ("the JUnit report lists tests the JSON summary does not", set(xml_worst) - set(said.statuses)),
        ("the JSON summary lists tests the JUnit report does not", set(said.statuses) - set(xml_worst)),
        ("the JUnit report and the JSON summary disagree on", differ),
    ):
        if ids:
            problems.append(f"{what}: {', '.join(sorted(ids)[:MAX_IDS_SHOWN])}")
    return problems


def _count_problems(cases: list[_Case], said: _Summary) -> list[str]:
    """Each of the summary's counts against the testcases the XML holds."""
    xml = Counter(c.outcome for c in cases)
    problems = [
        f"the JSON summary says {said.counts[key]} {category}, the JUnit report {xml[category]}"
        for key, category in COUNTS.items()
        if said.counts[key] != xml[category]
    ]
    if said.counts["numTotalTests"] != len(cases):
        problems.append(f"the JSON summary counts {said.counts['numTotalTests']} tests, the JUnit report {len(cases)}")
    return problems


def _exit_problems(tests: dict[str, TestOutcome], said: _Summary, exit_code: int | None) -> list[str]:
    """The runner exits 0 exactly when every test file loaded and no test failed."""
    failing = sorted(n for n, t in tests.items() if t.outcome in FAILING)
    if exit_code is None:
        return ["the runner did not exit on its own: what it reported may be cut short"]
    problems = []
    if not tests:
        problems.append(f"the reports hold no tests (the runner exited {exit_code})")
    if exit_code == 0 and failing:
        problems.append(f"the runner exited 0 but {len(failing)} did not pass: {', '.join(failing[:MAX_IDS_SHOWN])}")
    if exit_code != 0 and tests and not failing:
        problems.append(f"the runner exited {exit_code} but no test failed")
    if said.success is not None and said.success != (exit_code == 0):
        problems.append(f"the JSON summary says success={str(said.success).lower()} but the runner exited {exit_code}")
    return problems
