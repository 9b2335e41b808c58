"""JUnit XML (pytest's xunit1 flavour) into per-test outcomes keyed by pytest node id."""

from __future__ import annotations

from pathlib import Path

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from sandbox.results import TestOutcome

MAX_REPORT_BYTES = 32 * 1024 * 1024


class ReportError(ValueError):
    pass


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


def parse(path: Path) -> tuple[dict[str, TestOutcome], int]:
    """(outcomes by node id, the count the report claims)."""
    if not path.exists():
        raise ReportError("no JUnit report was written")
    if path.stat().st_size > MAX_REPORT_BYTES:
        raise ReportError("the JUnit report is too large")
    try:
        root = ElementTree.parse(str(path)).getroot()
    except (ElementTree.ParseError, DefusedXmlException) as exc:
        raise ReportError(f"the JUnit report is not valid XML: {exc}") from None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    outcomes: dict[str, TestOutcome] = {}
    claimed = 0
    for suite in suites:
        claimed += int(suite.get("tests", "0") or 0)
        for case in suite.iter("testcase"):
            node = nodeid(case.get("file", ""), case.get("classname", ""), case.get("name", ""))
            outcome, message = "passed", ""
            for child, label in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                found = case.find(child)
                if found is not None:
                    outcome, message = label, (found.get("message") or "")[:500]
                    break
            previous = outcomes.get(node)
            # pytest reports a test that fails in teardown twice; the worse outcome stands.
            if previous is None or previous.outcome == "passed":
                outcomes[node] = TestOutcome(node, outcome, float(case.get("time", "0") or 0), message)
    return outcomes, claimed
