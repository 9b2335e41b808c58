"""Verbs for a task statement rewritten by a model (tasks.builders.rewrite does the asking and judging).

The record of every rewrite, accepted or refused, goes into `task.metadata["statement_generation"]`
with the prompt and the original statement, so a generated statement is always marked as such
and can be traced back. An accepted rewrite changes the statement an agent reads: a new version
(`tasks.taskdir.task_version`, record included) and the task to be validated again. A refused one
changes nothing an agent sees, so the version stays (as for a secrets baseline).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from core.audit import AuditAction, record
from core.vocabulary import TaskSource
from tasks.builders.rewrite import (
    ChatClient,
    RewriteContext,
    StatementGeneration,
    assertions_in,
    function_of,
    rewrite,
)
from tasks.models import Task
from tasks.storage import read_tree_file
from tasks.taskdir import task_version
from tasks.tree_cache import fetch_tree
from tasks.trees import TreeError

logger = logging.getLogger(__name__)

GENERATION_KEY = "statement_generation"
# A test file read for its assertions; past this it is not a test anyone would quote from.
MAX_TEST_FILE_BYTES = 256 * 1024


class RewriteConflict(Exception):
    """The task changed while its statement was being generated; nothing was written."""


@dataclass
class RewriteOutcome:
    task_id: str
    status: str  # accepted | refused | skipped
    reason: str = ""
    generation: StatementGeneration | None = None


def generation_of(task: Task) -> dict[str, Any] | None:
    found = (task.metadata or {}).get(GENERATION_KEY)
    return found if isinstance(found, dict) else None


def original_statement(task: Task) -> str:
    """The statement a rewrite starts from: the composed one, even when a generated one replaced it."""
    previous = generation_of(task)
    if previous and previous.get("accepted") and previous.get("generated") == task.statement:
        original = previous.get("original")
        if isinstance(original, str) and original.strip():
            return original
    return task.statement


def skip_reason(task: Task, client: ChatClient, *, named: bool, redo: bool) -> str:
    """Why this task is left as it is, or "" to rewrite it."""
    if task.source == TaskSource.HANDWRITTEN and not named:
        # A person wrote it; only a task asked for by name gets a model's version.
        return "handwritten (name it with --tasks to rewrite it)"
    previous = generation_of(task)
    if previous and not redo and (previous.get("model"), previous.get("server")) == (client.model, client.server):
        return "already rewritten by this model (--redo to ask again)"
    return ""


def rewrite_context(task: Task) -> RewriteContext:
    """What the model is told (statement, failing tests, their assertions) and what its answer is checked against."""
    failing = [str(t) for t in task.fail_to_pass]
    return RewriteContext(
        statement=original_statement(task),
        expected_patch=task.expected_patch,
        failing_tests=failing,
        assertions=_assertions(task, failing),
        hidden_tests=[*failing, *(str(t) for t in task.pass_to_pass)],
        known_paths={str(entry[0]) for entry in task.snapshot_files if entry},
        base_commit=task.base_commit,
    )


def _assertions(task: Task, failing: list[str]) -> list[str]:
    files = {str(entry[0]) for entry in task.tests_files if entry}
    try:
        fetch_tree(task.tests_hash)
    except TreeError as exc:
        logger.warning("rewrite: the tests of %s cannot be read: %s", task.task_id, exc)
        return []
    found: list[str] = []
    for node in failing:
        path = node.split("::")[0]
        # Test ids name the file as the repository has it; the tree holds it under tests_dest.
        rel = next((f for f in sorted(files) if path == f or path.endswith("/" + f)), None)
        if rel is None:
            continue
        try:
            source = read_tree_file(task.tests_hash, rel, MAX_TEST_FILE_BYTES).decode("utf-8", "replace")
        except TreeError:
            continue
        found += [a for a in assertions_in(source, function_of(node)) if a not in found]
    return found


def rewrite_statement(task: Task, client: ChatClient, *, dry_run: bool = False) -> RewriteOutcome:
    """Ask the model for this task's statement and keep its verdict (unless a dry run).

    The request runs outside any transaction (it can take minutes); the write then insists the
    task is still the version the prompt was made from. RewriteError when the server gave no answer.
    """
    seen = task.version
    generation = rewrite(rewrite_context(task), client)
    status = "accepted" if generation["accepted"] else "refused"
    if not dry_run:
        record_statement_generation(task.pk, seen, generation)
    logger.info("rewrite: %s %s by %s: %s", task.task_id, status, client.model, generation["reason"] or "ok")
    return RewriteOutcome(task.task_id, status, generation["reason"], generation)


@transaction.atomic
def record_statement_generation(task_pk: int, seen_version: str, generation: StatementGeneration) -> Task:
    task = Task.objects.select_for_update().get(pk=task_pk)
    if task.version != seen_version:
        # A re-import or another rewrite got there first: this answer was to a statement that is gone.
        raise RewriteConflict(f"task {task.task_id} changed while its statement was being generated")
    task.metadata = {**(task.metadata or {}), GENERATION_KEY: dict(generation)}
    fields = ["metadata", "updated_at"]
    if generation["accepted"]:
        # The statement an agent reads is new content: a new version, as for a changed test command
        # (tasks.changes), and what validation said was about the old statement.
        task.statement = generation["generated"]
        task.version = task_version(
            task.statement, task.metadata, task.expected_patch, task.snapshot_hash, task.tests_hash
        )
        task.validation_status = Task.Validation.UNVALIDATED
        task.validation_report = {}
        fields += ["statement", "version", "validation_status", "validation_report"]
    # A refused rewrite is a note beside the task, like a secrets review: nothing an agent sees or
    # runs changed, so the version, and every trajectory recorded against it, stays.
    task.save(update_fields=fields)
    record(
        None,
        AuditAction.GENERATE,
        task,
        version=task.version,
        version_before=seen_version,
        what="statement",
        model=generation["model"],
        server=generation["server"],
        accepted=generation["accepted"],
        reason=generation["reason"],
    )
    return task
