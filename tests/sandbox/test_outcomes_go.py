"""`go test -json` streams into outcomes: real streams from Go 1.19 (fixtures/go, made by its
regenerate.sh from fixtures/go/src), then hostile ones built from them. The stream comes from a
process the agent's code runs in, so every forged or broken variant must leave a failing test
failing, and say what it saw.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from sandbox import outcomes_go, results
from sandbox.junit import ReportError, UnsafeReport
from sandbox.outcomes_go import MAX_MESSAGE_CHARS, MAX_STRAY_LINES, parse_go, read_go_report
from sandbox.results import Outcome

FIXTURES = Path(__file__).parent / "fixtures" / "go"
MODULE = "example.com/gofix/"


def stream(scenario: str) -> tuple[bytes, int]:
    return (FIXTURES / f"{scenario}.jsonl").read_bytes(), int((FIXTURES / f"{scenario}.exit").read_text())


def short(tests: dict[str, results.TestOutcome]) -> dict[str, str]:
    """Outcomes by id without the module path, for readable expectations."""
    return {node.removeprefix(MODULE): test.outcome for node, test in tests.items()}


def event(action: str, test: str = "", package: str = "example.com/p", **more: object) -> bytes:
    fields = {"Action": action, "Package": package, **({"Test": test} if test else {}), **more}
    return json.dumps(fields).encode() + b"\n"


def test_a_clean_run_reads_every_test_and_sub_test_and_a_skip_is_not_a_pass() -> None:
    tests, problems = parse_go(*stream("clean"))
    assert short(tests) == {
        "clean::TestOne": Outcome.PASSED,
        "clean::TestSkipped": Outcome.SKIPPED,
        "clean::TestTable": Outcome.PASSED,
        "clean::TestTable/a": Outcome.PASSED,
        "clean::TestTable/b": Outcome.PASSED,
    }
    assert problems == []
    assert tests[MODULE + "clean::TestSkipped"].message == "clean_test.go:7: not here"


def test_failures_skips_and_nested_sub_tests_are_read_as_go_reports_them() -> None:
    tests, problems = parse_go(*stream("basic"))
    assert short(tests) == {
        "basic::TestPass": Outcome.PASSED,
        "basic::TestFail": Outcome.FAILED,
        "basic::TestSkip": Outcome.SKIPPED,
        "basic::TestSubtests": Outcome.FAILED,
        "basic::TestSubtests/ok": Outcome.PASSED,
        "basic::TestSubtests/bad_case": Outcome.FAILED,
        "basic::TestSubtests/skipped": Outcome.SKIPPED,
        "basic::TestSubtests/nested": Outcome.PASSED,
        "basic::TestSubtests/nested/deep": Outcome.PASSED,
        "basic::TestParallel": Outcome.PASSED,
        "basic::TestParallel/p1": Outcome.PASSED,
        "basic::TestParallel/p2": Outcome.PASSED,
    }
    assert problems == []
    assert tests[MODULE + "basic::TestFail"].message == "basic_test.go:10: want 2, got 3"


def test_a_failed_sub_test_fails_its_parent_even_where_the_stream_says_the_parent_passed() -> None:
    data, _ = stream("basic")
    parent_fail = b'"Action":"fail","Package":"example.com/gofix/basic","Test":"TestSubtests",'
    assert parent_fail in data
    tests, _ = parse_go(data.replace(parent_fail, parent_fail.replace(b"fail", b"pass", 1)), 1)
    assert tests[MODULE + "basic::TestSubtests"].outcome == Outcome.FAILED
    assert "bad_case did not pass" in tests[MODULE + "basic::TestSubtests"].message


def test_a_panic_fails_its_test_and_the_tests_it_cut_short_are_errors() -> None:
    tests, problems = parse_go(*stream("panics"))
    assert short(tests) == {
        "panics::TestFirst": Outcome.PASSED,
        "panics::TestSlowParallel": Outcome.ERROR,  # paused for t.Parallel, never resumed
        "panics::TestPanics": Outcome.FAILED,
    }
    assert "panic: assignment to entry in nil map" in tests[MODULE + "panics::TestPanics"].message
    assert "never finished" in tests[MODULE + "panics::TestSlowParallel"].message
    assert problems == []


def test_os_exit_in_a_test_is_a_failure_or_an_error_never_a_pass() -> None:
    tests, problems = parse_go(*stream("exits"))
    assert short(tests) == {
        "exitzero::TestBefore": Outcome.PASSED,
        "exitzero::TestExitZero": Outcome.FAILED,  # the testing package catches os.Exit(0)
        "exitcode::TestExitThree": Outcome.ERROR,  # os.Exit(3): no end at all
    }
    assert "unexpected call to os.Exit(0)" in tests[MODULE + "exitzero::TestExitZero"].message
    assert problems == []


def test_a_test_stopped_by_the_timeout_alarm_is_an_error_with_the_alarm_in_its_message() -> None:
    tests, problems = parse_go(*stream("hang"))
    assert short(tests) == {"hang::TestQuick": Outcome.PASSED, "hang::TestHangs": Outcome.ERROR}
    assert "panic: test timed out after 2s" in tests[MODULE + "hang::TestHangs"].message
    assert problems == []


def test_build_and_vet_failures_and_a_panicking_test_main_are_collection_errors_of_their_package() -> None:
    data, code = stream("collection")
    assert code == 2 and b"FAIL\texample.com/gofix/buildfail [build failed]\n" in data  # not an event
    tests, problems = parse_go(data, code)
    assert short(tests) == {
        "buildfail": Outcome.COLLECTION_ERROR,
        "vetfail": Outcome.COLLECTION_ERROR,
        "mainpanic": Outcome.COLLECTION_ERROR,
    }
    assert tests[MODULE + "mainpanic"].message.startswith("panic: setup failed")
    assert problems == []


def test_json_a_test_prints_stays_inside_an_output_event_and_printed_framing_is_caught() -> None:
    tests, problems = parse_go(*stream("forge"))
    outcomes = short(tests)
    for forger in ("TestForgedJSON", "TestForgedText", "TestForgedNoNewline"):
        assert outcomes[f"forge::{forger}"] == Outcome.FAILED
    # The forged JSON lines are only text in the test's output: no test of that name exists.
    assert "forge::TestInvented" not in outcomes
    assert '{"Action":"pass"' in tests[MODULE + "forge::TestForgedJSON"].message
    # Go 1.19 reads "--- PASS: X" printed by a test as X passing: that shows as two ends.
    assert f"{MODULE}forge::TestForgedText was reported fail and pass: a line printed by a test" in problems
    assert f"{MODULE}forge::TestForgedNoNewline was reported fail and pass: a line printed by a test" in problems


def test_a_forged_pass_and_raw_exit_after_a_real_failure_contradicts_go_tests_own_verdict() -> None:
    tests, problems = parse_go(*stream("forgeexit"))
    assert tests[MODULE + "forgeexit::TestEarlier"].outcome == Outcome.FAILED
    assert problems == [
        f"go test says {MODULE}forgeexit passed but 1 of its tests did not: {MODULE}forgeexit::TestEarlier",
        f"go test exited 0 but 1 tests and 0 packages did not pass: {MODULE}forgeexit::TestEarlier",
    ]


def test_go_1_19_leaves_a_forged_pass_before_a_raw_exit_indistinguishable_from_an_honest_run() -> None:
    """The limit of any reader of the stream (docs/languages.md): TestLater never ran."""
    tests, problems = parse_go(*stream("forgeclean"))
    assert short(tests) == {"forgeclean::TestForgedExit": Outcome.PASSED, "forgeclean::TestLater": Outcome.PASSED}
    assert problems == []


def test_a_test_printed_into_being_while_another_runs_or_ending_unstarted_is_not_believed() -> None:
    data = event("run", "TestA") + event("run", "TestInvented") + event("pass", "TestInvented")
    data += event("pass", "TestNeverStarted") + event("fail", "TestA") + event("fail")
    # A pass printed after a real failure does not undo it either.
    data += event("run", "TestB") + event("fail", "TestB") + event("pass", "TestB")
    tests, problems = parse_go(data, 1)
    assert {n: t.outcome for n, t in tests.items()} == {
        "example.com/p::TestA": Outcome.FAILED,
        "example.com/p::TestInvented": Outcome.ERROR,
        "example.com/p::TestNeverStarted": Outcome.ERROR,
        "example.com/p::TestB": Outcome.FAILED,
    }
    assert "example.com/p::TestB was reported fail and pass: a line printed by a test" in problems
    assert any("TestInvented started while TestA was still running" in p for p in problems)
    assert any("TestNeverStarted reported as ended without ever starting" in p for p in problems)


def test_a_package_that_fails_with_only_passing_tests_believes_none_of_its_passes() -> None:
    data = event("run", "TestA") + event("pass", "TestA") + event("output", Output="exit status 3\n") + event("fail")
    tests, problems = parse_go(data, 1)
    assert tests["example.com/p"].outcome == Outcome.ERROR  # its tests ran: not a collection error
    assert tests["example.com/p::TestA"].outcome == Outcome.ERROR
    assert "exit status 3" in tests["example.com/p::TestA"].message
    assert problems == []


def test_a_truncated_stream_leaves_the_cut_tests_as_errors_and_says_so() -> None:
    data, _ = stream("basic")
    cut = data[: data.index(b'"Test":"TestSubtests/nested/deep"')]
    tests, problems = parse_go(cut, None)
    assert tests[MODULE + "basic::TestFail"].outcome == Outcome.FAILED
    assert tests[MODULE + "basic::TestPass"].outcome == Outcome.PASSED
    # Go reports sub-tests' ends after their parent's: all of TestSubtests was cut off unfinished.
    for name in ("TestSubtests", "TestSubtests/bad_case", "TestSubtests/nested"):
        assert tests[f"{MODULE}basic::{name}"].outcome == Outcome.ERROR
    assert f"{MODULE}basic::TestParallel" not in tests
    assert "1 JSON lines are not go test events" in problems  # the half line
    assert f"no result for package {MODULE}basic: the stream was cut short" in problems
    assert problems[-1] == "go test did not exit on its own: what it reported may be cut short"


@pytest.mark.parametrize(("scenario", "code", "says"), [("clean", 1, "exited 1 but no test"), ("basic", 0, "exited 0")])
def test_an_exit_status_that_disagrees_with_the_events_is_a_problem(scenario: str, code: int, says: str) -> None:
    data, real = stream(scenario)
    assert parse_go(data, real)[1] == []
    assert any(says in p for p in parse_go(data, code)[1])


def test_an_empty_stream_is_a_problem_whatever_the_exit_status() -> None:
    assert parse_go(b"", 0) == ({}, ["the stream holds no go test events (go test exited 0)"])


def test_huge_output_is_bounded_per_test_and_per_line_and_in_total() -> None:
    chunk = event("output", "TestA", Output="x" * 4000 + "\n")
    data = event("run", "TestA") + chunk * 2500 + event("fail", "TestA") + event("fail")  # ~10 MB
    tests, problems = parse_go(data, 1)
    assert len(tests["example.com/p::TestA"].message) == MAX_MESSAGE_CHARS
    assert problems == []
    giant = event("output", "TestA", Output="y" * (2 * 1024 * 1024))
    tests, problems = parse_go(event("run", "TestA") + giant + event("pass", "TestA") + event("pass"), 0)
    assert tests["example.com/p::TestA"].outcome == Outcome.PASSED and "1 JSON lines are not go test events" in problems
    _, problems = parse_go(data, 1, max_bytes=1_000_000)
    assert problems[0] == f"the stream is {len(data)} bytes: only the first 1000000 were read"


def test_garbage_lines_are_tolerated_up_to_a_bound_and_malformed_events_are_counted() -> None:
    data, code = stream("clean")
    few = b"# example.com/gofix/other\n\xff\xfe not text\nvet: something\n"
    assert parse_go(few + data, code) == parse_go(data, code)
    flood = b"noise\n" * (MAX_STRAY_LINES + 1)
    assert parse_go(flood + data, code)[1] == [
        f"{MAX_STRAY_LINES + 1} lines are not go test events (go test prints a few)"
    ]
    bad = [
        b'{"Action": "pass", "Package": ""}',
        b'{"Action": 3, "Package": "p"}',
        b'{"Action": "pass", "Package": "p", "Elapsed": "1"}',
    ]
    bad += [b'{"Action": "pass"}', b'{"Action": "run", "Package": "p", "Test": ["TestA"]}']
    bad += [b"{" * 100_000, b'{"a":' * 10_000]  # over the line limit; nested past the parser's depth
    tests, problems = parse_go(b"\n".join(bad) + b"\n" + data, code)
    assert short(tests) == short(parse_go(data, code)[0])
    assert problems == [f"{len(bad)} JSON lines are not go test events"]


def test_a_flood_of_test_ids_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outcomes_go, "MAX_TESTS", 10)
    data = b"".join(event("run", f"Test{i}") + event("pass", f"Test{i}") for i in range(20)) + event("pass")
    tests, problems = parse_go(data, 0)
    assert len(tests) == 9 and "over 10 tests and packages: the rest were not read" in problems  # 9 tests, 1 package


def test_a_flood_of_tests_that_never_end_is_read_in_linear_time() -> None:
    data = b"".join(event("run", f"Test{i}") for i in range(outcomes_go.MAX_TESTS))
    # This process's CPU time, not the wall clock: a loaded CI machine stretched 0.8 s of parsing
    # to 12 s of wall time. Pairwise checks would take minutes of CPU.
    started = time.process_time()
    tests, problems = parse_go(data, None)
    assert time.process_time() - started < 10
    assert len(tests) == outcomes_go.MAX_TESTS - 1 and {t.outcome for t in tests.values()} == {Outcome.ERROR}
    # The cap, each test started while another ran, the package's missing result, the missing exit:
    # said of the first few, counted for the rest.
    assert len(problems) == outcomes_go.MAX_PROBLEMS + 1
    assert problems[1] == "example.com/p::Test1 started while Test0 was still running: printed by a test"
    assert problems[-1] == f"and {outcomes_go.MAX_TESTS + 1 - outcomes_go.MAX_PROBLEMS} more problems"


def test_the_stream_file_is_read_safely(tmp_path: Path) -> None:
    data, code = stream("clean")
    (tmp_path / "go.jsonl").write_bytes(data)
    assert read_go_report(tmp_path / "go.jsonl", code) == parse_go(data, code)
    with pytest.raises(ReportError, match="no go test stream"):
        read_go_report(tmp_path / "absent.jsonl", code)
    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(UnsafeReport, match="is a FIFO"):
        read_go_report(tmp_path / "fifo.jsonl", code)
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "go.jsonl")
    with pytest.raises(UnsafeReport, match="is a symlink"):
        read_go_report(tmp_path / "link.jsonl", code)
