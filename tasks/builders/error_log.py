"""Tasks from error logs: a stack trace or failing test output plus a repository.

The statement is the log itself; the verifier is the failing test the log names (or
the one given). An expected patch is optional: without one the task can be solved
and scored, and validation says it could not confirm the fix. A Go or JavaScript
repository's log is read in its runner's terms (tasks.builders.lang_logs).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path, PurePosixPath

from sandbox.node_versions import NodeVersionError, node_metadata
from tasks.builders import lang_history, lang_logs
from tasks.builders.common import DEFAULT_TEST_COMMAND, BuildError, common_dir, task_slug, write_task_dir
from tasks.builders.common import repo_name as canonical_name
from tasks.lang_tests import GO, JAVASCRIPT, PYTHON
from tasks.storage import iter_tree

FAILED_NODE = re.compile(r"^(?:FAILED|ERROR)\s+(\S+\.py::\S+)", re.MULTILINE)
TRACE_FILE = re.compile(r'File "([^"]+\.py)", line \d+')
MAX_LOG_CHARS = 20000
# What a log must hold for its failing tests to be found, by the repository's language.
LOG_LINES = {
    PYTHON: "pytest's 'FAILED path::test' lines",
    GO: "go test's '--- FAIL: TestX' and 'FAIL\t<package>' lines, or -json fail events",
    JAVASCRIPT: "Jest's 'FAIL <file>' and '● describe › test' lines, or Vitest's 'FAIL <file> > test'",
}


def failing_tests(log: str) -> list[str]:
    return sorted(set(FAILED_NODE.findall(log)))


def build_task(
    repo: Path,
    log: str,
    out: Path,
    tests: list[str] | None = None,
    expected_patch: str = "",
    repo_name: str | None = None,
    task_id: str | None = None,
    test_command: str = DEFAULT_TEST_COMMAND,
) -> Path:
    if not log.strip():
        raise BuildError("the log is empty")
    language = lang_history.tree_language(repo)
    nodes = tests or (failing_tests(log) if language == PYTHON else lang_logs.failing_ids(log, language))
    if not nodes:
        raise BuildError(f"the log names no failing test ({LOG_LINES[language]}); pass --test ID")
    files = sorted({node.split("::")[0] for node in nodes})
    if language != PYTHON:
        files = lang_logs.hidden_files(repo, nodes, language)
    outside = [f for f in files if PurePosixPath(f).is_absolute() or ".." in PurePosixPath(f).parts]
    if outside:
        raise BuildError(f"the log names test files outside the repository: {', '.join(outside)[:300]}")
    missing = [f for f in files if not (repo / f).is_file()]
    if missing:
        raise BuildError(f"the failing tests' files are not in {repo}: {', '.join(missing)}")
    iter_tree(repo)  # refuses symlinks before anything is copied
    hidden = {f: (repo / f).read_bytes() for f in files}
    text = log if len(log) <= MAX_LOG_CHARS else log[: MAX_LOG_CHARS // 2] + "\n[...]\n" + log[-MAX_LOG_CHARS // 2 :]
    statement = (
        "# Failing tests\n\nThe test run below fails. Find the cause in the code and fix it "
        "(the tests are right).\n\n```\n" + text.replace("```", "'''") + "\n```\n"
    )
    name = repo_name or canonical_name(repo)
    try:
        node = node_metadata(repo, language)
    except NodeVersionError as exc:
        raise BuildError(str(exc)) from None
    digest = hashlib.sha256(log.encode() + "\0".join(nodes).encode()).hexdigest()[:10]
    metadata = {
        "source": "error_log",
        "repo": name,
        **({"test_command": test_command} if language == PYTHON else {"language": language}),
        **node,
        **(lang_history.tree_go_toolchain(repo) if language == GO else {}),
        "fail_to_pass": nodes,
        "tags": ["error_log"],
    }
    task_id = task_id or f"{task_slug(name)}-log-{digest}"
    dest = common_dir(files) if language == PYTHON else lang_history.tests_dest(language, common_dir(files))
    return write_task_dir(out, task_id, statement, repo, hidden, dest, expected_patch, metadata)
