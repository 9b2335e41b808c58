"""Jest's and Vitest's reports into outcomes: real reports from the pinned runners (fixtures/js, made by
its regenerate.sh from the projects in fixtures/js/*/src), then hostile ones built from them. Both
files come from a process the agent's code runs in: a forged or broken pair must never turn a
failing test into a pass, and must say what disagrees.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from sandbox import results
from sandbox.junit import ReportError, UnsafeReport
from sandbox.outcomes_js import JsRunner, parse_js, read_js_report
from sandbox.results import Outcome

FIXTURES = Path(__file__).parent / "fixtures" / "js"
FORGER = 'forge.test.js::forges "/><testcase name="invented'
# One id scheme for both runners: the same projects read the same.
ALL = {
    FORGER: Outcome.FAILED,
    "math.test.js::adds": Outcome.PASSED,
    "math.test.js::fails": Outcome.FAILED,
    "math.test.js::skipped": Outcome.SKIPPED,
    "math.test.js::to be written": Outcome.SKIPPED,  # a todo
    "math.test.js::outer > passes inside": Outcome.PASSED,
    "math.test.js::outer > inner > deep pass": Outcome.PASSED,
    "math.test.js::outer > inner > deep fail": Outcome.FAILED,
    "clean.test.js::one": Outcome.PASSED,
    "clean.test.js::group > two": Outcome.PASSED,
    "clean.test.js::group > not now": Outcome.SKIPPED,
    "clean.test.js::group > later": Outcome.SKIPPED,  # a todo
    "hook.test.js::passes first": Outcome.PASSED,
    "hook.test.js": Outcome.ERROR,  # its afterAll threw after its test passed
    "broken.test.js": Outcome.COLLECTION_ERROR,  # its import failed: no test in it ran
}
CLEAN = {k: v for k, v in ALL.items() if k.startswith("clean.test.js")}


def reports(runner: str, scenario: str) -> tuple[bytes, bytes, int]:
    folder = FIXTURES / runner / scenario
    xml, summary = (folder / "junit.xml").read_bytes(), (folder / "results.json").read_bytes()
    return xml, summary, int((folder / "exit_code").read_text())


def read(runner: str, xml: bytes, summary: bytes, code: int | None) -> tuple[dict[str, str], list[str]]:
    tests, problems = parse_js(xml, summary, code, JsRunner(runner))
    return {node: test.outcome for node, test in tests.items()}, problems


def edit_summary(summary: bytes, **changes: object) -> bytes:
    return json.dumps({**json.loads(summary), **changes}).encode()


@pytest.mark.parametrize("runner", ["jest", "vitest"])
def test_a_real_run_reads_every_test_file_and_describe_path_with_no_problem(runner: str) -> None:
    assert read(runner, *reports(runner, "all")) == (ALL, [])


@pytest.mark.parametrize("runner", ["jest", "vitest"])
def test_a_passing_run_exits_0_and_its_skip_and_todo_are_not_passes(runner: str) -> None:
    xml, summary, code = reports(runner, "clean")
    assert code == 0 and read(runner, xml, summary, code) == (CLEAN, [])
    tests, _ = parse_js(xml, summary, code, JsRunner(runner))
    assert tests["clean.test.js::group > later"].message == "todo"
    assert not results.TestReport(results.ExecResult(0, "", ""), tests).passed("clean.test.js::group > later")


def test_jest_junit_writes_a_todo_as_a_bare_testcase_and_the_summary_tells_it_apart() -> None:
    xml, summary, code = reports("jest", "clean")
    assert re.search(rb'<testcase classname="group" name="later" [^>]*>\s*</testcase>', xml)  # looks passed
    tests, problems = parse_js(xml, summary, code, JsRunner.JEST)
    assert tests["clean.test.js::group > later"].outcome == Outcome.SKIPPED and problems == []


def test_a_file_jest_junit_leaves_out_is_still_a_collection_error_from_the_summary() -> None:
    xml, summary, code = reports("jest", "suite-errors-off")
    assert b"broken.test.js" not in xml and b"broken.test.js" in summary
    outcomes, problems = read("jest", xml, summary, code)
    assert outcomes == {**CLEAN, "broken.test.js": Outcome.COLLECTION_ERROR} and problems == []


@pytest.mark.parametrize("runner", ["jest", "vitest"])
def test_a_test_that_writes_fake_reports_is_overwritten_by_the_runner_and_fails(runner: str) -> None:
    xml, summary, code = reports(runner, "all")
    tests, _ = parse_js(xml, summary, code, JsRunner(runner))
    assert tests[FORGER].outcome == Outcome.FAILED
    assert "forge.test.js::forged" not in tests and 'name="forged"' not in xml.decode()  # escaped, if present at all
    assert json.loads(summary)["numTotalTests"] == 13


@pytest.mark.parametrize("runner", ["jest", "vitest"])
def test_an_xml_claiming_more_passes_than_the_summary_does_not_pass_the_failing_test(runner: str) -> None:
    xml, summary, code = reports(runner, "all")
    # The failing test's <failure> removed: the XML says it passed, the summary still says failed.
    forged = re.sub(rb'(name="fails"[^>]*>)\s*<failure.*?</failure>', rb"\1", xml, count=1, flags=re.DOTALL)
    assert forged != xml
    outcomes, problems = read(runner, forged, summary, code)
    assert outcomes["math.test.js::fails"] == Outcome.FAILED
    assert "the JUnit report and the JSON summary disagree on: math.test.js::fails" in problems
    assert "the JSON summary says 6 passed, the JUnit report 7" in problems


@pytest.mark.parametrize("runner", ["jest", "vitest"])
def test_a_passing_test_the_summary_never_ran_is_an_error(runner: str) -> None:
    xml, summary, code = reports(runner, "clean")
    where = b'classname="" file="clean.test.js"' if runner == "jest" else b'classname="clean.test.js"'
    invented = b"<testcase " + where + b' name="invented" time="0"/></testsuite>'
    tests, problems = parse_js(xml.replace(b"</testsuite>", invented), summary, code, JsRunner(runner))
    assert tests["clean.test.js::invented"].outcome == Outcome.ERROR
    assert tests["clean.test.js::invented"].message == "not in the runner's JSON summary"
    assert "the JUnit report lists tests the JSON summary does not: clean.test.js::invented" in problems
    assert "the JSON summary counts 4 tests, the JUnit report 5" in problems


def test_a_summary_whose_counts_or_success_disagree_is_a_problem() -> None:
    xml, summary, code = reports("vitest", "clean")
    problems = read("vitest", xml, edit_summary(summary, numPassedTests=3, numTotalTests=5, success=False), code)[1]
    assert problems == [
        "the JSON summary says 3 passed, the JUnit report 2",
        "the JSON summary counts 5 tests, the JUnit report 4",
        "the JSON summary says success=false but the runner exited 0",
    ]


def test_a_test_listed_twice_keeps_its_worse_outcome() -> None:
    xml, summary, code = reports("vitest", "clean")
    twice = xml.replace(
        b"</testsuite>", b'<testcase classname="clean.test.js" name="one"><failure/></testcase></testsuite>'
    )
    outcomes, problems = read("vitest", twice, summary, 1)
    assert outcomes["clean.test.js::one"] == Outcome.FAILED
    assert "the JSON summary says 0 failed, the JUnit report 1" in problems


@pytest.mark.parametrize("runner", ["jest", "vitest"])
def test_a_title_used_twice_with_a_pass_and_a_failure_is_one_failing_test_both_reports_agree_on(runner: str) -> None:
    # `it.each` cases whose titles interpolate alike (tough-cookie's two timing tests, titled by a
    # 65,535-space input each): under load one fails, its twin passes. Both reports say so; before,
    # the passing twin was read as a disagreement and the whole honest run was distrusted.
    xml, summary, _ = reports(runner, "clean")
    twin = (
        b'<testcase classname="" name="one" time="0.1" file="clean.test.js"><failure message="slow"/></testcase>'
        if runner == "jest"
        else b'<testcase classname="clean.test.js" name="one" time="0.1"><failure message="slow"/></testcase>'
    )
    xml = xml.replace(b"</testsuite>", twin + b"</testsuite>")
    data = json.loads(summary)
    [result] = data["testResults"]
    failed = {**result["assertionResults"][0], "status": "failed", "failureMessages": ["slow"]}
    result["assertionResults"].append(failed)
    result["status"] = "failed"
    data.update(numFailedTests=1, numTotalTests=data["numTotalTests"] + 1, success=False)
    outcomes, problems = read(runner, xml, json.dumps(data).encode(), 1)
    assert problems == []
    assert outcomes["clean.test.js::one"] == Outcome.FAILED

    # Each side is still checked: the summary calling both passes is a disagreement, and so is a
    # summary that drops the failing twin (its counts).
    result["assertionResults"][-1]["status"] = "passed"
    problems = read(runner, xml, json.dumps(data).encode(), 1)[1]
    assert "the JUnit report and the JSON summary disagree on: clean.test.js::one" in problems
    result["assertionResults"].pop()
    data.update(numFailedTests=0, numTotalTests=data["numTotalTests"] - 1)
    problems = read(runner, xml, json.dumps(data).encode(), 1)[1]
    assert "the JSON summary says 0 failed, the JUnit report 1" in problems


@pytest.mark.parametrize(
    ("runner", "scenario", "code", "says"),
    [
        ("jest", "all", 0, "the runner exited 0 but 5 did not pass"),
        ("vitest", "clean", 1, "the runner exited 1 but no test failed"),
    ],
)
def test_an_exit_status_that_disagrees_with_the_reports_is_a_problem(
    runner: str, scenario: str, code: int, says: str
) -> None:
    xml, summary, _ = reports(runner, scenario)
    assert any(p.startswith(says) for p in read(runner, xml, summary, code)[1])
    assert "the runner did not exit on its own" in read(runner, xml, summary, None)[1][0]


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<testsuites><testsuite><testcase classname="a.test.js" name="&lol3;"/></testsuite></testsuites>"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE t [<!ENTITY secret SYSTEM "file:///etc/hostname">]>
<testsuites><testsuite><testcase classname="a.test.js" name="&secret;"/></testsuite></testsuites>"""


@pytest.mark.parametrize("bomb", [BILLION_LAUGHS, EXTERNAL, b"<testsuites><testsuite>", b"\x00\xff"])
def test_xml_bombs_and_broken_xml_are_refused(bomb: bytes) -> None:
    _, summary, code = reports("vitest", "clean")
    with pytest.raises(ReportError, match="not valid XML"):
        parse_js(bomb, summary, code, JsRunner.VITEST)


COUNTED = '"numTotalTests": 0, "numPassedTests": 0, "numFailedTests": 0, "numPendingTests": 0, "numTodoTests": 0'


@pytest.mark.parametrize(
    "summary",
    [
        b"not json",
        b"[" * 100_000,
        b"[]",
        b'{"testResults": 3}',
        ('{"testResults": [], ' + COUNTED.replace('"numPassedTests": 0', '"numPassedTests": "2"') + "}").encode(),
        ('{"testResults": [], ' + COUNTED.replace('"numTodoTests": 0', '"numTodoTests": true') + "}").encode(),
        ('{"testResults": [], ' + COUNTED.replace('"numTotalTests": 0', '"numTotalTests": -1') + "}").encode(),
        ('{"testResults": [{"name": "x"}], ' + COUNTED + "}").encode(),
    ],
)
def test_a_summary_that_is_not_a_runner_summary_is_refused(summary: bytes) -> None:
    xml, _, code = reports("vitest", "clean")
    with pytest.raises(ReportError):
        parse_js(xml, summary, code, JsRunner.VITEST)


def test_a_jest_report_without_the_file_attribute_is_refused() -> None:
    xml, summary, code = reports("jest", "clean")
    with pytest.raises(ReportError, match="JEST_JUNIT_ADD_FILE_ATTRIBUTE"):
        parse_js(re.sub(rb' file="[^"]*"', b"", xml), summary, code, JsRunner.JEST)


def test_the_report_files_are_read_safely(tmp_path: Path) -> None:
    xml, summary, code = reports("vitest", "clean")
    (tmp_path / "junit.xml").write_bytes(xml)
    (tmp_path / "results.json").write_bytes(summary)
    got = read_js_report(tmp_path / "junit.xml", tmp_path / "results.json", code, JsRunner.VITEST)
    assert got == parse_js(xml, summary, code, JsRunner.VITEST)
    with pytest.raises(ReportError, match="no JSON summary"):
        read_js_report(tmp_path / "junit.xml", tmp_path / "absent.json", code, JsRunner.VITEST)
    os.mkfifo(tmp_path / "fifo.xml")
    with pytest.raises(UnsafeReport, match="is a FIFO"):
        read_js_report(tmp_path / "fifo.xml", tmp_path / "results.json", code, JsRunner.VITEST)
    (tmp_path / "link.json").symlink_to(tmp_path / "results.json")
    with pytest.raises(UnsafeReport, match="is a symlink"):
        read_js_report(tmp_path / "junit.xml", tmp_path / "link.json", code, JsRunner.VITEST)
