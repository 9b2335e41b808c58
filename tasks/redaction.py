"""Redaction of a task on import (core.redaction's rules, applied to a task's parts).

What is redacted: the statement, the metadata's free text (repo URL, hints, any unknown key)
and what the expected patch adds. What is only reported (audit log, `(kept: ...)`):
- metadata that is run or matched (test_command, test ids, tests_dest, ...): a changed one
  breaks the task;
- the expected patch's context and removed lines: they must match the repository;
- the files of the repository snapshot and hidden tests. They are the code the tests run
  on, and a changed file (even a README a doctest reads) can break them; they sit in the
  content-addressed store exactly as imported, so a report names the file for a person
  to judge, and an export that ships file contents must redact them on the way out.
"""

from __future__ import annotations

from core.redaction import Finding, redact_patch, redact_record, redact_text
from tasks.storage import tree_path
from tasks.taskdir import TaskDir

# Metadata that the harness runs or matches against test output: reported, never changed.
EXECUTED_KEYS = frozenset(
    {"task_id", "test_command", "tests_dest", "fail_to_pass", "pass_to_pass", "visible_tests", "base_commit"}
)
# A repository file larger than this is not read for the report (minified bundles, data).
SCAN_FILE_MAX = 256 * 1024
# Nor more than this per tree: the report is a pointer for a person, not a full audit.
SCAN_TREE_MAX = 8 * 1024 * 1024


def redact_task_dir(task: TaskDir) -> list[Finding]:
    """Redact a parsed task in place, before its version is computed; returns what was found."""
    findings: list[Finding] = []
    task.statement, found = redact_text(task.statement, "task.statement")
    findings.extend(found)
    for key, value in list(task.metadata.items()):
        where = f"task.metadata.{key}"
        clean, found = redact_record(value, where)
        if key in EXECUTED_KEYS:
            findings.extend(Finding(f.rule, f"{f.where} (kept: executed)", f.fingerprint) for f in found)
            continue
        task.metadata[key] = clean
        findings.extend(found)
    task.expected_patch, found = redact_patch(task.expected_patch, "task.expected_patch")
    findings.extend(found)
    return findings


def scan_task_trees(task: TaskDir) -> list[Finding]:
    """What the stored snapshot and hidden tests hold, reported and kept (read once per version)."""
    return [
        *_scan_tree(task.snapshot_hash, task.snapshot_files, "task.snapshot"),
        *_scan_tree(task.tests_hash, task.tests_files, "task.tests"),
    ]


def _scan_tree(digest: str, manifest: list[list[object]], prefix: str) -> list[Finding]:
    """Findings in a stored tree's text files, each marked kept (see the module docstring)."""
    if not digest:
        return []
    root = tree_path(digest)
    findings: list[Finding] = []
    budget = SCAN_TREE_MAX
    for entry in manifest:
        rel, size = str(entry[0]), entry[1]
        if not isinstance(size, int) or size > SCAN_FILE_MAX or size > budget:
            continue
        budget -= size
        try:
            # The store is Crucible's own copy (links refused when it was written).
            text = (root / rel).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # binary, or gone: nothing a reader of text would see
        _, found = redact_text(text, f"{prefix}/{rel}")
        findings.extend(Finding(f.rule, f"{f.where} (kept: repository file)", f.fingerprint) for f in found)
    return findings
