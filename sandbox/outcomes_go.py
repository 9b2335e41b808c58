"""`go test -json` (test2json's event stream) into per-test outcomes keyed "<package>::<Test>",
with the cross-checks the stream allows, reported beside them as a list of problems.

A sub-test is its own id ("<package>::TestA/case"); a failed sub-test fails its parents, as Go
does. A test that started and never reported an end (a panic elsewhere, os.Exit, the -timeout
alarm) is an ERROR; a skip is not a pass. A package that failed with no failing test is a
COLLECTION_ERROR keyed by the package when none of its tests started (a build or vet failure, a
TestMain that panicked), an ERROR keyed by it otherwise, and then none of its passes is believed.

The stream is written by a process the agent's code runs in. `go test -json` wraps what the test
binary prints in `output` events, so a JSON line a test prints is only ever an Output string. But
Go before 1.20 builds the events by reading the binary's output as text: a test that prints
"--- PASS: TestX (0.00s)" makes a real `pass` event. What that leaves is checked here (a test
that both passed and failed, one that started while another top-level test was still running,
one that ended without starting, a package that passed with failing tests, an exit status that
disagrees); a forged pass followed by a raw exit(0) before any test failed leaves the stream of
an honest run, which no reader of the stream can tell apart (docs/languages.md).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.junit import MAX_IDS_SHOWN, MAX_REPORT_BYTES, ReportError, read_safely
from sandbox.results import Outcome, TestOutcome

MAX_STREAM_BYTES = MAX_REPORT_BYTES
# test2json cuts the binary's output into lines of a few KB; escaped as JSON, far below this.
MAX_LINE_BYTES = 64 * 1024
MAX_MESSAGE_CHARS = 500
MAX_TESTS = 50_000
MAX_PROBLEMS = 50
# go test prints "FAIL\t<pkg> [build failed]" outside the events; more than this is not go test.
MAX_STRAY_LINES = 1000
# Go 1.19 prints a build (or vet) failure as a plain line on stdout; later versions also as events.
BUILD_FAILED = re.compile(r"^FAIL\t(\S+) \[(build failed|setup failed)\]$")
FINAL = {"pass": Outcome.PASSED, "skip": Outcome.SKIPPED, "fail": Outcome.FAILED}
# The worse of two reports about one test stands: a printed "--- PASS" never undoes a real FAIL.
RANK: dict[str, int] = {Outcome.PASSED: 0, Outcome.SKIPPED: 1, Outcome.ERROR: 2, Outcome.FAILED: 3}
NOT_PASSED = (Outcome.FAILED, Outcome.ERROR)
FRAMING = ("=== RUN", "=== PAUSE", "=== CONT", "--- PASS", "--- FAIL", "--- SKIP")
NEVER_ENDED = "started but never finished: its test binary died (a panic, os.Exit or the -timeout alarm)"


@dataclass
class _Test:
    started: bool = False
    outcome: str = ""
    finals: set[str] = field(default_factory=set)
    elapsed: float = 0.0
    output: str = ""
    suspect: str = ""  # why a pass it reports is not believed


@dataclass
class _Package:
    result: str = ""
    results: int = 0
    build_failed: str = ""
    output: str = ""
    running: set[str] = field(default_factory=set)  # top-level tests running, not paused
    tests: dict[str, _Test] = field(default_factory=dict)


@dataclass
class _Stream:
    packages: dict[str, _Package] = field(default_factory=dict)
    count: int = 0
    stray: int = 0
    malformed: int = 0
    capped: bool = False

    def package(self, name: str) -> _Package:
        return self.packages.setdefault(name, _Package())


def read_go_report(path: Path, exit_code: int | None) -> tuple[dict[str, TestOutcome], list[str]]:
    """(outcomes by id, problems) from a saved `go test -json` stream, read safely."""
    data = read_safely(path, MAX_STREAM_BYTES)
    if data is None:
        raise ReportError("no go test stream was written")
    return parse_go(data, exit_code)


def parse_go(
    data: bytes, exit_code: int | None, max_bytes: int = MAX_STREAM_BYTES
) -> tuple[dict[str, TestOutcome], list[str]]:
    """(outcomes by id, problems) from the stdout of `go test -json` and its exit status."""
    problems = []
    if len(data) > max_bytes:
        problems.append(f"the stream is {len(data)} bytes: only the first {max_bytes} were read")
        data = data[:max_bytes]
    stream = _Stream()
    for line in data.split(b"\n"):
        _feed(stream, line.strip())
    if stream.stray > MAX_STRAY_LINES:
        problems.append(f"{stream.stray} lines are not go test events (go test prints a few)")
    if stream.malformed:
        problems.append(f"{stream.malformed} JSON lines are not go test events")
    if stream.capped:
        problems.append(f"over {MAX_TESTS} tests and packages: the rest were not read")
    tests: dict[str, TestOutcome] = {}
    for name, package in stream.packages.items():
        problems += _package_outcomes(name, package, tests)
    problems += _exit_problems(tests, stream, exit_code)
    if len(problems) > MAX_PROBLEMS:
        problems[MAX_PROBLEMS:] = [f"and {len(problems) - MAX_PROBLEMS} more problems"]
    return tests, problems


def _feed(stream: _Stream, line: bytes) -> None:
    if not line:
        return
    if len(line) > MAX_LINE_BYTES:
        stream.malformed += 1
        return
    if not line.startswith(b"{"):
        # Only the first few are looked at: a flood of them is itself the problem reported.
        if stream.stray < MAX_STRAY_LINES and (built := BUILD_FAILED.match(line.decode("utf-8", "replace"))):
            stream.package(built[1]).build_failed = built[0]
        stream.stray += 1
        return
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        stream.malformed += 1
        return
    if isinstance(event, dict) and str(event.get("Action", "")).startswith("build-"):
        return  # Go 1.24's compiler output, keyed by ImportPath: the package's own fail event follows
    if not _well_formed(event):
        stream.malformed += 1
        return
    _apply(stream, event)


def _well_formed(event: Any) -> bool:
    """test2json's own shape: an object with string Action, Package, Test and Output, a numeric Elapsed."""
    if not isinstance(event, dict) or not isinstance(event.get("Action"), str) or not event.get("Package"):
        return False
    strings = all(isinstance(event.get(key, ""), str) for key in ("Package", "Test", "Output"))
    elapsed = event.get("Elapsed", 0)
    return strings and isinstance(elapsed, int | float) and not isinstance(elapsed, bool)


def _apply(stream: _Stream, event: dict[str, Any]) -> None:
    action, name, package = event["Action"], event.get("Test", ""), stream.packages.get(event["Package"])
    if package is None:
        # Packages count against the same bound as tests: each costs memory the stream chose.
        if not _room(stream):
            return
        package = stream.package(event["Package"])
    if not name:
        if action == "output":
            package.output = _bounded(package.output, event.get("Output", ""))
        elif action in FINAL:
            package.results += 1
            package.result = _worse(package.result, FINAL[action])
        return
    test = package.tests.get(name)
    if test is None:
        if not _room(stream):
            return
        test = package.tests[name] = _Test()
    top = "/" not in name
    if action in ("run", "cont"):
        other = next((n for n in package.running if n != name), "") if action == "run" and top else ""
        if other and not test.suspect:
            test.suspect = f"started while {other} was still running: printed by a test"
        test.started = True
        if top:
            package.running.add(name)
    elif action == "pause":
        package.running.discard(name)
    elif action in FINAL:
        if not test.started and not test.suspect:
            test.suspect = "reported as ended without ever starting: printed by a test"
        test.finals.add(action)
        test.outcome = _worse(test.outcome, FINAL[action])
        test.elapsed = _seconds(event.get("Elapsed", 0))
        package.running.discard(name)
    elif action == "output":
        test.output = _bounded(test.output, event.get("Output", ""))


def _room(stream: _Stream) -> bool:
    if stream.count >= MAX_TESTS:
        stream.capped = True
        return False
    stream.count += 1
    return True


def _worse(kept: str, more: str) -> str:
    return more if not kept or RANK[more] > RANK[kept] else kept


def _bounded(kept: str, more: str) -> str:
    """A test's message: what it printed, framing lines aside, up to MAX_MESSAGE_CHARS."""
    if len(kept) >= MAX_MESSAGE_CHARS or more.lstrip().startswith(FRAMING):
        return kept
    return (kept + more)[:MAX_MESSAGE_CHARS]


def _seconds(value: float) -> float:
    return float(value) if math.isfinite(value) and value >= 0 else 0.0


def _package_outcomes(name: str, package: _Package, tests: dict[str, TestOutcome]) -> list[str]:
    """The package's tests into `tests`; then what the package's own result says against them."""
    problems: list[str] = []
    mine: dict[str, TestOutcome] = {}
    for test_name, test in package.tests.items():
        node = f"{name}::{test_name}"
        outcome: str
        if not test.outcome:
            outcome, message = Outcome.ERROR, f"{NEVER_ENDED}\n{test.output}".strip()
        elif test.suspect and test.outcome == Outcome.PASSED:
            outcome, message = Outcome.ERROR, test.suspect
        else:
            outcome, message = test.outcome, test.output.strip()
        mine[test_name] = TestOutcome(node, outcome, test.elapsed, message[:MAX_MESSAGE_CHARS])
        if test.suspect:
            problems.append(f"{node} {test.suspect}")
        if len(test.finals) > 1:
            problems.append(f"{node} was reported {' and '.join(sorted(test.finals))}: a line printed by a test")
    _fail_parents(mine)
    failing = sorted(t.nodeid for t in mine.values() if t.outcome in NOT_PASSED)
    failed = package.result == Outcome.FAILED or bool(package.build_failed)
    if failed and not failing:
        started = any(t.started for t in package.tests.values())
        why = (package.build_failed or package.output.strip() or "the package failed")[:MAX_MESSAGE_CHARS]
        tests[name] = TestOutcome(name, Outcome.ERROR if started else Outcome.COLLECTION_ERROR, 0.0, why)
        for reported in mine.values():
            if reported.outcome == Outcome.PASSED:
                reported.outcome, reported.message = Outcome.ERROR, f"its package failed with no failing test: {why}"
    if package.result == Outcome.PASSED and failing:
        shown = ", ".join(failing[:MAX_IDS_SHOWN])
        problems.append(f"go test says {name} passed but {len(failing)} of its tests did not: {shown}")
    if package.tests and not package.result and not package.build_failed:
        problems.append(f"no result for package {name}: the stream was cut short")
    if package.results > 1:
        problems.append(f"package {name} was given {package.results} results")
    tests.update({t.nodeid: t for t in mine.values()})
    return problems


def _fail_parents(tests: dict[str, TestOutcome]) -> None:
    """A sub-test that failed (or never ended) fails each test it runs under, as Go does."""
    for name in sorted(tests, key=lambda n: -n.count("/")):
        child = tests[name]
        parent = tests.get(name.rpartition("/")[0]) if "/" in name else None
        if parent and child.outcome in NOT_PASSED and RANK[parent.outcome] < RANK[child.outcome]:
            parent.outcome = child.outcome
            parent.message = parent.message or f"its sub-test {name} did not pass"


def _exit_problems(tests: dict[str, TestOutcome], stream: _Stream, exit_code: int | None) -> list[str]:
    """go test exits 0 exactly when every package it ran passed."""
    failing = [t.nodeid for t in tests.values() if t.outcome not in (Outcome.PASSED, Outcome.SKIPPED)]
    failed = [n for n, p in stream.packages.items() if p.result == Outcome.FAILED or p.build_failed]
    if exit_code is None:
        return ["go test did not exit on its own: what it reported may be cut short"]
    if not stream.packages:
        return [f"the stream holds no go test events (go test exited {exit_code})"]
    if exit_code == 0 and (failing or failed):
        shown = ", ".join(sorted(failing or failed)[:MAX_IDS_SHOWN])
        return [f"go test exited 0 but {len(failing)} tests and {len(failed)} packages did not pass: {shown}"]
    if exit_code != 0 and not failing and not failed:
        return [f"go test exited {exit_code} but no test or package failed"]
    return []
