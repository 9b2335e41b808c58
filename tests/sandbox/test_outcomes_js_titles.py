"""A test title holding characters XML cannot (a real one: tough-cookie's `Cookie.parse("\\b")`) gives
the same id from both reports and both runners: jest-junit writes it raw, Vitest removes it."""

from __future__ import annotations

import json

import pytest

from sandbox.outcomes_js import JsRunner, parse_js

TITLE = 'parse("\b\x00\x7f")'


def summary(status: str) -> bytes:
    return json.dumps(
        {
            "success": status == "passed",
            "numPassedTests": int(status == "passed"),
            "numFailedTests": int(status == "failed"),
            "numPendingTests": 0,
            "numTodoTests": 0,
            "numTotalTests": 1,
            "testResults": [
                {
                    "name": "/workspace/src/a.test.js",
                    "status": status,
                    "assertionResults": [{"title": TITLE, "ancestorTitles": ["Cookie"], "status": status}],
                }
            ],
        }
    ).encode()


def xml(runner: JsRunner, failed: bool) -> bytes:
    failure = '<failure message="no\x01pe">\x1b[31mno\x02pe</failure>' if failed else ""
    if runner == JsRunner.JEST:  # jest-junit: the characters as they are, in the name and the failure
        name = TITLE.replace('"', "&quot;")
        case = f'<testcase classname="Cookie" name="{name}" file="src/a.test.js">{failure}</testcase>'
    else:  # Vitest: already removed
        case = f'<testcase classname="src/a.test.js" name="Cookie &gt; parse(&quot;&quot;)">{failure}</testcase>'
    return f'<?xml version="1.0"?><testsuites><testsuite name="x">{case}</testsuite></testsuites>'.encode()


@pytest.mark.parametrize("runner", [JsRunner.JEST, JsRunner.VITEST])
@pytest.mark.parametrize("status", ["passed", "failed"])
def test_a_title_with_characters_xml_cannot_hold_is_one_id(runner: JsRunner, status: str) -> None:
    tests, problems = parse_js(xml(runner, status == "failed"), summary(status), int(status == "failed"), runner)
    assert problems == []
    assert list(tests) == ['src/a.test.js::Cookie > parse("")']
    assert str(tests['src/a.test.js::Cookie > parse("")'].outcome) == status
