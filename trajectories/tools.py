"""The agent's tools: their schemas (shown to the model) and how each runs in the sandbox.

Plain Python over a `sandbox.Sandbox`; observations are bounded here so a command that
prints megabytes cannot blow up a trajectory or a model's context.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from core.vocabulary import ActionType
from sandbox import Sandbox, SandboxError, ToolError
from sandbox.lang_run import check_backend
from sandbox.results import Outcome, TestReport
from trajectories.lang_runs import LanguageRunner
from trajectories.schema import HarnessTests, hash_test_id

MAX_OBSERVATION_CHARS = 8000
# Test ids a step keeps from one run (13 bytes each in JSON); a bigger run keeps its counts only.
MAX_TEST_IDS = 5000
# Tool name -> the action type its steps are recorded as (both searches are "search").
TOOL_ACTION_TYPES: dict[str, ActionType] = {
    "read_file": ActionType.READ_FILE,
    "write_file": ActionType.WRITE_FILE,
    "edit_file": ActionType.EDIT_FILE,
    "run_command": ActionType.RUN_COMMAND,
    "search": ActionType.SEARCH,
    "search_symbol": ActionType.SEARCH,
    "run_tests": ActionType.RUN_TESTS,
    "submit": ActionType.SUBMIT,
}


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_S = {"type": "string"}
TOOLS: list[dict[str, Any]] = [
    _fn("read_file", "Read a file of the repository.", {"path": _S}, ["path"]),
    _fn(
        "write_file",
        "Create or overwrite a file with the given content.",
        {"path": _S, "content": _S},
        ["path", "content"],
    ),
    _fn(
        "edit_file",
        "Replace one exact occurrence of old_text with new_text in a file.",
        {"path": _S, "old_text": _S, "new_text": _S},
        ["path", "old_text", "new_text"],
    ),
    _fn("run_command", "Run a shell command in the repository (no network).", {"command": _S}, ["command"]),
    _fn("search", "Search the repository's files for a text.", {"pattern": _S}, ["pattern"]),
    _fn(
        "search_symbol",
        "Find where a function, method, class or type is defined (Python, Go, JavaScript or TypeScript); "
        "a method as Owner.name.",
        {"name": _S},
        ["name"],
    ),
    _fn(
        "run_tests",
        "Run the repository's visible tests with its test runner (optionally only some test files, "
        "folders or test ids).",
        {"paths": {"type": "array", "items": _S}},
        [],
    ),
    _fn("submit", "Finish: your changes to the repository are the answer.", {}, []),
]


@dataclass
class ToolResult:
    observation: str
    truncated: bool
    exit_code: int | None
    sandbox_ms: float  # time spent running in a sandbox, for the infra-overhead bench
    # The counts of the harness's own test run (run_tests only): what process rewards trust.
    harness_tests: HarnessTests | None = None


def bound(text: str, limit: int = MAX_OBSERVATION_CHARS) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters omitted ...]\n{text[-half:]}", True


def harness_counts(report: TestReport) -> HarnessTests:
    """What the harness's report says about a run, not what the run printed.

    An xfail-marked test (xfailed, xpassed, or a strict XPASS the report calls failed) is in no
    count and no list: its outcome is its marker's say as much as the code's. Counted, deleting a
    marker would turn a strict XPASS "failure" into a pass that process rewards pay for as a fix.
    """
    judged = [t for t in report.tests.values() if not t.xfail]
    outcomes = Counter(t.outcome for t in judged)
    failed = [hash_test_id(t.nodeid) for t in judged if t.outcome in (Outcome.FAILED, Outcome.ERROR)]
    passed = [hash_test_id(t.nodeid) for t in judged if report.passed(t.nodeid)]
    complete = len(failed) + len(passed) <= MAX_TEST_IDS
    return {
        "passed": len(passed),
        "failed": outcomes[Outcome.FAILED],
        "errors": outcomes[Outcome.ERROR],
        "skipped": outcomes[Outcome.SKIPPED],
        "collected": report.collected,
        "valid": report.valid,
        "failed_ids": sorted(failed) if complete else [],
        "passed_ids": sorted(passed) if complete else [],
        "ids_complete": complete,
    }


def _str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"argument '{key}' must be a string")
    return value


def run_tool(
    box: Sandbox,
    name: str,
    args: dict[str, Any],
    visible_tests: list[str],
    timeout: float,
    runner: LanguageRunner | None = None,
) -> ToolResult:
    """Run one tool call; a ToolError becomes the observation (the agent sees what was wrong).

    `runner` is a Go or JavaScript task's (trajectories.lang_runs): run_tests goes through it
    instead of pytest. None: a Python task."""
    try:
        return _run(box, name, args, visible_tests, timeout, runner)
    except ToolError as exc:
        return ToolResult(f"error: {exc}", False, None, 0.0)


def _run(
    box: Sandbox,
    name: str,
    args: dict[str, Any],
    visible_tests: list[str],
    timeout: float,
    runner: LanguageRunner | None,
) -> ToolResult:
    if name == "read_file":
        text, truncated = bound(box.read_file(_str(args, "path")))
        return ToolResult(text, truncated, None, 0.0)
    if name == "write_file":
        return ToolResult(box.write_file(_str(args, "path"), _str(args, "content")), False, None, 0.0)
    if name == "edit_file":
        return ToolResult(
            box.edit_file(_str(args, "path"), _str(args, "old_text"), _str(args, "new_text")), False, None, 0.0
        )
    if name == "search":
        hits = box.search(_str(args, "pattern"))
        text, truncated = bound("\n".join(map(str, hits)) or "no matches")
        return ToolResult(text, truncated, None, 0.0)
    if name == "search_symbol":
        hits = box.search_symbol(_str(args, "name"))
        return ToolResult("\n".join(map(str, hits)) or "no definitions found", False, None, 0.0)
    if name == "run_command":
        result = box.exec(_str(args, "command"), timeout=timeout)
        text = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
        if result.timed_out:
            text += f"\n[timed out after {timeout:g} s]"
        text, truncated = bound(text)
        return ToolResult(text, truncated or result.truncated, result.exit_code, result.duration_ms)
    if name == "run_tests":
        paths = args.get("paths") or visible_tests
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise ToolError("argument 'paths' must be a list of strings")
        # These go straight into pytest's argv, which does not honour "--": an option here
        # (-p, -k, --deselect, -c) would let the agent choose what the harness runs and reports.
        if any(p.startswith("-") or not p.strip() for p in paths):
            raise ToolError("argument 'paths' must be test paths or node ids, not options")
        if runner is not None:
            return _run_language_tests(box, runner, paths)
        report = box.run_tests(paths, timeout=timeout)
        text, truncated = bound(report.exec.stdout + report.exec.stderr)
        return ToolResult(text, truncated, report.exec.exit_code, report.exec.duration_ms, harness_counts(report))
    if name == "submit":
        return ToolResult("submitted", False, None, 0.0)
    raise ToolError(f"unknown tool {name!r}; the tools are: {', '.join(TOOL_ACTION_TYPES)}")


def _run_language_tests(box: Sandbox, runner: LanguageRunner, paths: list[str]) -> ToolResult:
    started = time.perf_counter()
    check_backend(box.backend)  # a host's setting (only bwrap runs them): an episode error, not an observation
    try:
        run = runner.run(box, paths)
    except SandboxError as exc:
        # Refused for what was asked or what the workspace holds (an id, a deleted package, a
        # planted node_modules): the agent's to read and correct, as a bad pytest path is.
        raise ToolError(f"the test run was refused: {str(exc)[:2000]}") from None
    text, truncated = bound(run.text)
    sandbox_ms = run.report.exec.duration_ms or (time.perf_counter() - started) * 1000
    return ToolResult(text, truncated, run.report.exec.exit_code, sandbox_ms, harness_counts(run.report))
