"""The failing tests a Go or JavaScript test run's output names, as the runners' ids
(docs/languages.md): what an error-log task (tasks.builders.error_log) hides and lists.

- `go test` (text or `-json`): each top-level `--- FAIL: TestX` belongs to the package whose
  `FAIL\t<import path>` line follows it; `-json` events say both at once. Id `<package>::TestX`.
- Jest: `FAIL <file>` heads a file's failures and each `● describe › test` names one. Vitest:
  `FAIL  <file> > describe > test` names one per line. Id `<file>::describe > test`.

A log is hostile text: it is read line by line, bounded, and nothing in it is run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath

from sandbox.backends.base import SandboxError
from sandbox.go_run import module_path
from sandbox.outcomes_js import SEPARATOR
from tasks.builders.common import BuildError
from tasks.lang_tests import GO, JAVASCRIPT

MAX_LINE = 4000
MAX_TESTS = 500
_GO_TEST = re.compile(r"^--- FAIL: (Test\w*|Example\w*|Fuzz\w*) \(")
_GO_PACKAGE = re.compile(r"^FAIL\s+(\S+)(?:\s+[\d.]+s|\s+\[[^\]]*\])\s*$")
_JEST_FILE = re.compile(r"^\s*FAIL\s+(\S+\.[cm]?[jt]sx?)\s*$")
_JEST_TEST = re.compile(r"^\s*● (.+?)\s*$")
_VITEST_TEST = re.compile(r"^\s*(?:FAIL|×|✗)\s+(\S+\.[cm]?[jt]sx?) > (.+?)\s*$")
_JEST_NESTING = " › "


def failing_ids(log: str, language: str) -> list[str]:
    """The failing tests the log names, in the language's runner's ids (sorted, at most MAX_TESTS)."""
    lines = [line[:MAX_LINE] for line in log.splitlines()]
    found = _go_ids(lines) if language == GO else _js_ids(lines)
    return sorted(found)[:MAX_TESTS]


def _go_ids(lines: list[str]) -> set[str]:
    found: set[str] = set()
    pending: list[str] = []
    for line in lines:
        if line.startswith("{"):
            found |= _go_event(line)
        elif test := _GO_TEST.match(line):
            pending.append(test.group(1))
        elif package := _GO_PACKAGE.match(line):
            found |= {f"{package.group(1)}::{name}" for name in pending}
            pending = []
    return found


def _go_event(line: str) -> set[str]:
    try:
        event = json.loads(line)
    except ValueError:
        return set()
    if not isinstance(event, dict) or event.get("Action") != "fail":
        return set()
    package, test = event.get("Package"), event.get("Test")
    if not isinstance(package, str) or not isinstance(test, str) or "/" in test or not test:
        return set()  # a package's own fail, or a sub-test (its parent fails too)
    return {f"{package}::{test}"}


def _js_ids(lines: list[str]) -> set[str]:
    found: set[str] = set()
    current = ""
    for line in lines:
        if vitest := _VITEST_TEST.match(line):
            found.add(f"{vitest.group(1)}::{vitest.group(2)}")
        elif jest_file := _JEST_FILE.match(line):
            current = jest_file.group(1)
        elif (jest := _JEST_TEST.match(line)) and current and jest.group(1) != "Test suite failed to run":
            found.add(f"{current}::{SEPARATOR.join(jest.group(1).split(_JEST_NESTING))}")
    return found


def hidden_files(repo: Path, ids: list[str], language: str) -> list[str]:
    """The test files to hide for `ids`: a Go package's `*_test.go` files, or the JavaScript files named."""
    if language == JAVASCRIPT:
        return sorted({test_id.split("::", 1)[0] for test_id in ids})
    try:
        module, _ = module_path(repo)
    except SandboxError as exc:
        raise BuildError(str(exc)) from None
    files: set[str] = set()
    for package in {test_id.split("::", 1)[0] for test_id in ids}:
        if package != module and not package.startswith(module + "/"):
            raise BuildError(f"the log's package {package[:200]!r} is not in module {module!r}")
        folder = PurePosixPath(package.removeprefix(module).lstrip("/") or ".")
        tests = sorted(p.name for p in (repo / folder).glob("*_test.go") if p.is_file() and not p.is_symlink())
        if not tests:
            raise BuildError(f"package {package[:200]!r} has no *_test.go file in {repo}")
        files |= {(folder / name).as_posix() for name in tests}
    return sorted(files)
