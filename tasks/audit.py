"""What the audit log keeps of a task's import: what redaction found, and how a built task was made."""

from __future__ import annotations

from typing import Any

from core.audit import AuditAction, record, record_redactions
from core.redaction import Finding
from core.vocabulary import TaskSource
from tasks.models import Task
from tasks.redaction import scan_task_trees
from tasks.taskdir import TaskDir

# A generation record names each edit a builder made; a hostile metadata.json could list
# thousands, and the log is for people.
GENERATION_ITEMS_MAX = 20
GENERATION_TEXT_MAX = 200
GENERATION_KEYS = ("path", "operator", "description", "line", "function")


def record_task_import(row: Task, task: TaskDir, redactions: list[Finding]) -> None:
    """Called in the import's transaction for each task created or given a new version."""
    record_redactions(None, row, [*redactions, *scan_task_trees(task)], version=row.version)
    detail = generation_detail(task.metadata)
    if detail is not None:
        record(None, AuditAction.GENERATE, row, version=row.version, **detail)


def generation_detail(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """How a builder made the task (its generation record, for audit), from what it wrote into metadata.json.

    None for a handwritten task: a person wrote it, and the import says nothing of how.
    """
    source = str(metadata.get("source", TaskSource.HANDWRITTEN))
    if source == TaskSource.HANDWRITTEN:
        return None
    detail: dict[str, Any] = {"source": source[:GENERATION_TEXT_MAX]}
    for key in ("repo", "base_commit", "license"):
        if isinstance(metadata.get(key), str):
            detail[key] = metadata[key][:GENERATION_TEXT_MAX]
    edits = metadata.get("mutation")
    if isinstance(edits, list):
        detail["edits"] = len(edits)
        detail["mutation"] = [
            {k: _short(edit[k]) for k in GENERATION_KEYS if k in edit}
            for edit in edits[:GENERATION_ITEMS_MAX]
            if isinstance(edit, dict)
        ]
    return detail


def _short(value: Any) -> Any:
    if isinstance(value, str):
        return value[:GENERATION_TEXT_MAX]
    return value if isinstance(value, (int, float, bool)) or value is None else str(value)[:GENERATION_TEXT_MAX]
