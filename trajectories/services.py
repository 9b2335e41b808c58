"""Verbs that change trajectories: import from JSONL (export lives in exports.py).

Every imported record passes through core.redaction before it is stored: secrets, internal
host names and personal data in prompts, observations, actions, thoughts and patches become
`[REDACTED:<rule>]`, and the audit log says which rule fired in which field how often.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import IO, Any

import orjson
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import audit
from core.audit import count_findings, record_redactions
from core.redaction import Finding, default, redact_patch, redact_record, redact_text, rules_version, strings
from tasks.models import Task
from trajectories.bulk import insert_steps, insert_trajectories, refresh_statistics, step_row
from trajectories.models import Trajectory, duplicate_rate
from trajectories.schema import ClaimedOutcome, RecordError, check_record

# A chunk is flushed to the database at whichever limit comes first; memory stays
# bounded by the chunk, never by the file.
CHUNK_TRAJECTORIES = 500
CHUNK_STEPS = 5000
# Only the reward service writes these (trajectories.schema: claimed vs verified). A record
# never carries them, and the import drops them anyway should a future record grow one.
VERIFIED_FIELDS = frozenset({"final_reward", "success", "flags", "scored_spec", "scored_at"})


@dataclass
class TrajectoryImportResult:
    lines: int = 0
    created: int = 0
    skipped: int = 0
    steps: int = 0
    redacted: int = 0  # secrets, hosts and personal data replaced by placeholders


# What a record says in its own words, and so what may hold a secret. Ids, hashes, numbers
# and vocabulary (action types, sources) are left as they are: they are what joins and
# replays rely on. A step's action_input is redacted too: replaying a redacted call writes
# the placeholder, which is the point.
RECORD_TEXT = ("prompt", "policy_model")
RECORD_JSON = ("policy", "sandbox", "extra", "claimed")
STEP_TEXT = ("observation", "thought")
STEP_JSON = ("action_input", "extra")


def redact_trajectory_record(record: dict[str, Any]) -> list[Finding]:
    """Redact a checked record in place; the findings name fields as `trajectory.steps[2].observation`.

    One scan of all the record's text finds the rules that can fire anywhere in it (a
    core.redaction Scope): most records hold no rule's trigger and cost nothing more, and in
    the others only the steps that hold one are redacted field by field.
    """
    top = [*(record[name] for name in RECORD_TEXT), record["patch"]]
    top.extend(text for name in RECORD_JSON for text in strings(record[name]))
    per_step = [_step_texts(step) for step in record["steps"]]
    scope = default().scope(chain(top, chain.from_iterable(per_step)))
    findings: list[Finding] = []
    if not scope:
        return findings
    own = scope.narrow(top)
    if own:
        for name in RECORD_TEXT:
            record[name], found = redact_text(record[name], f"trajectory.{name}", redactor=own)
            findings.extend(found)
        for name in RECORD_JSON:
            record[name], found = redact_record(record[name], f"trajectory.{name}", redactor=own)
            findings.extend(found)
        # The patch is applied to the task's repository when it is scored: only what it adds changes.
        record["patch"], found = redact_patch(record["patch"], "trajectory.patch", redactor=own)
        findings.extend(found)
    for index, (step, texts) in enumerate(zip(record["steps"], per_step, strict=True)):
        own = scope.narrow(texts)
        if not own:
            continue
        for name in STEP_TEXT:
            step[name], found = redact_text(step[name], f"trajectory.steps[{index}].{name}", redactor=own)
            findings.extend(found)
        for name in STEP_JSON:
            step[name], found = redact_record(step[name], f"trajectory.steps[{index}].{name}", redactor=own)
            findings.extend(found)
    return findings


def _step_texts(step: dict[str, Any]) -> list[str]:
    texts = [step["observation"], step["thought"]]
    for name in STEP_JSON:
        value = step[name]
        if isinstance(value, str):
            texts.append(value)
        elif value:
            texts.extend(strings(value))
    return texts


def _strip_nuls(value: Any) -> Any:
    # PostgreSQL text and jsonb cannot hold U+0000; agents do print it.
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_strip_nuls(v) for v in value]
    if isinstance(value, dict):
        return {_strip_nuls(k): _strip_nuls(v) for k, v in value.items()}
    return value


def read_records(fh: IO[bytes], on_bytes: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
    """Checked records from a JSONL stream, one line in memory at a time."""
    limit = settings.CRUCIBLE_MAX_JSONL_LINE_BYTES
    lineno = 0
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        lineno += 1
        if on_bytes is not None:
            on_bytes(len(line))
        if len(line) > limit and not line.endswith(b"\n"):
            raise RecordError(lineno, f"line is longer than the {limit // (1024 * 1024)} MiB limit")
        if not line.strip():
            continue
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise RecordError(lineno, f"not valid JSON ({exc})") from None
        if b"\\u0000" in line:
            raw = _strip_nuls(raw)
        record = check_record(raw, lineno, line)
        record["lineno"] = lineno
        yield record


def store_trajectory(raw: dict[str, Any], origin: str, *, verified: ClaimedOutcome | None = None) -> Trajectory:
    """One record of the interchange shape that Crucible made itself (a training run's generation),
    written as an import writes each record of a file: bounded as a line is, checked by
    trajectories.schema, redacted, its steps through the bulk writer. `verified` is the outcome the
    maker scored it with under a reward spec; a record's own outcome is only ever a claim.
    `origin` says in the audit log where a redacted record came from. Raises RecordError for a
    record an import would refuse.
    """
    line = orjson.dumps(raw)
    limit = settings.CRUCIBLE_MAX_JSONL_LINE_BYTES
    if len(line) > limit:
        raise RecordError(1, f"record is longer than the {limit // (1024 * 1024)} MiB limit")
    record = check_record(_strip_nuls(raw) if b"\\u0000" in line else raw, 1, line)
    record["lineno"] = 1
    findings = redact_trajectory_record(record)
    with transaction.atomic():
        _insert_chunk([record], {}, TrajectoryImportResult(), allow_unknown_tasks=True)
        if verified is not None:
            Trajectory.objects.filter(trajectory_id=record["trajectory_id"]).update(
                final_reward=verified["final_reward"], success=verified["success"]
            )
        if findings:
            record_redactions(None, f"trajectory {record['trajectory_id']}", findings, source=origin)
    return Trajectory.objects.get(trajectory_id=record["trajectory_id"])


def import_trajectories(
    path: Path,
    on_bytes: Callable[[int], None] | None = None,
    *,
    allow_unknown_tasks: bool = False,
    actor: Any = None,
) -> TrajectoryImportResult:
    """Import a trajectory JSONL file in one transaction.

    A bad line anywhere rolls back the whole file, so the database is exactly as it
    was; records whose trajectory_id is already stored are skipped, so importing the
    same file twice adds nothing. A record for a task this database does not have is
    refused (a typo'd task id would otherwise make a trajectory nothing can score or
    replay) unless `allow_unknown_tasks`, which keeps it unlinked. What redaction replaced is
    recorded in the audit log (by rule and field, never the text), in the same transaction.
    """
    result = TrajectoryImportResult()
    redactions: Counter[tuple[str, str]] = Counter()
    tasks: dict[str, tuple[int, int] | None] = {}
    with path.open("rb") as fh, transaction.atomic():
        chunk: list[dict[str, Any]] = []
        chunk_steps = 0
        for record in read_records(fh, on_bytes):
            result.lines += 1
            count_findings(redact_trajectory_record(record), into=redactions)
            chunk.append(record)
            chunk_steps += len(record["steps"])
            if len(chunk) >= CHUNK_TRAJECTORIES or chunk_steps >= CHUNK_STEPS:
                _insert_chunk(chunk, tasks, result, allow_unknown_tasks)
                chunk, chunk_steps = [], 0
        if chunk:
            _insert_chunk(chunk, tasks, result, allow_unknown_tasks)
        refresh_statistics(result.steps)
        result.redacted = sum(n for (_rule, where), n in redactions.items() if "(kept" not in where)
        # A skipped duplicate was redacted and counted like the rest: the counts say what the
        # file held, which is what someone tracing a leaked secret needs.
        target = f"trajectory import {path.name}"
        counts = {"created": result.created, "skipped": result.skipped, "redacted": result.redacted}
        audit.record(actor, audit.AuditAction.IMPORT, target, **counts)
        record_redactions(actor, target, redactions, source=path.name)
    return result


def _insert_chunk(
    chunk: list[dict[str, Any]],
    tasks: dict[str, tuple[int, int] | None],
    result: TrajectoryImportResult,
    allow_unknown_tasks: bool,
) -> None:
    ids = [r["trajectory_id"] for r in chunk]
    existing = set(Trajectory.objects.filter(trajectory_id__in=ids).values_list("trajectory_id", flat=True))
    missing_refs = {r["task_ref"] for r in chunk} - tasks.keys()
    if missing_refs:
        for task_id, pk, suite_id in Task.objects.filter(task_id__in=missing_refs).values_list(
            "task_id", "pk", "suite_id"
        ):
            tasks[task_id] = (pk, suite_id)
        for ref in missing_refs:
            tasks.setdefault(ref, None)
    if not allow_unknown_tasks:
        unknown = next((r for r in chunk if tasks[r["task_ref"]] is None), None)
        if unknown is not None:
            raise RecordError(
                unknown["lineno"],
                f"task {unknown['task_ref'][:80]!r} is not in this database; import its suite first, "
                "or allow unknown tasks (--allow-unknown-tasks) to keep the trajectory unlinked",
            )

    now = timezone.now()
    version = rules_version()  # every text field went through the rules in force
    fresh: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for record in chunk:
        if record["trajectory_id"] in existing:
            result.skipped += 1
            continue
        existing.add(record["trajectory_id"])  # a duplicate later in the same file
        link = tasks[record["task_ref"]]
        fields = {k: v for k, v in record.items() if k not in ("steps", "lineno") and k not in VERIFIED_FIELDS}
        fields["created_at"] = fields["created_at"] or now
        fields["step_count"] = len(record["steps"])
        fields["duplicate_rate"] = duplicate_rate([(st["action_type"], st["action_input"]) for st in record["steps"]])
        fields["redacted_with"] = version
        fields["task_id"], fields["suite_id"] = link if link else (None, None)
        rows.append(fields)
        fresh.append(record)
    if not rows:
        return
    pks = insert_trajectories(rows)
    steps = [step_row(pk, step) for pk, record in zip(pks, fresh, strict=True) for step in record["steps"]]
    insert_steps(steps)
    result.created += len(rows)
    result.steps += len(steps)
