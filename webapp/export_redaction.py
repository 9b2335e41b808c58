"""Redaction on the way out: every exported record, line and file passes through here.

Unless an admin asked for the data unredacted, each record goes through
`core.redaction.redact_record` (a diff through `redact_patch`, so its context lines still apply);
the `Tally` counts records and findings by rule, never the text, for the export's audit event.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from core.audit import RedactionCounts, count_findings
from core.redaction import Finding, redact_patch, redact_record, redact_text, rules_version
from trajectories.exports import ExportLine

# The key of the first JSONL record (and the metadata of other formats) that says an export is unredacted.
UNREDACTED_MARK = "export_unredacted"
JSON_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")
# Fields that hold a unified diff: redacted as a patch, not as text.
PATCH_KEYS = ("patch", "expected_patch", "model_patch", "test_patch")


@dataclass
class Tally:
    count: int = 0
    findings: int = 0
    by_rule: RedactionCounts = field(default_factory=Counter)  # (rule, field) -> count, never the text

    def found(self, findings: list[Finding]) -> None:
        self.findings += len(findings)
        count_findings(findings, into=self.by_rule)

    def rules(self) -> dict[str, int]:
        per_rule: Counter[str] = Counter()
        for (rule, _), count in self.by_rule.items():
            per_rule[rule] += count
        return dict(per_rule)


def redact_row(row: dict[str, Any], where: str) -> tuple[dict[str, Any], list[Finding]]:
    """The row with every string redacted; a diff only in the lines it adds (core.redaction.redact_patch),
    so the context lines still match the repository it applies to."""
    diffs = {key for key in PATCH_KEYS if isinstance(row.get(key), str)}
    clean, findings = redact_record({k: v for k, v in row.items() if k not in diffs}, where)
    for key in diffs:
        clean[key], found = redact_patch(row[key], f"{where}.{key}")
        findings.extend(found)
    return {key: clean[key] for key in row}, findings  # the key order of the record, so a file reads the same


def needs_redaction(row: dict[str, Any]) -> bool:
    """Whether any rule fires anywhere in the record, found by one scan of its JSON text.

    One scan of a record costs a fraction of one call per string (a step has a dozen), and most
    records hold nothing. In the JSON text an escape (\\n, \\", \\uXXXX) stands for one character
    of a string; a space stands in for it here: like the newline, quote or backslash it replaces,
    it is no word character, so no rule's match or word boundary moves. A hit, or a false alarm
    spanning two fields, sends the record to redact_row, the field-by-field pass whose result is
    the one written.
    """
    return fires(orjson.dumps(row).decode())


def fires(json_text: str) -> bool:
    return bool(redact_text(JSON_ESCAPE.sub(" ", json_text), "")[1])


def redacted_lines(lines: Iterator[ExportLine], where: str, redacted: bool, tally: Tally) -> Iterator[bytes]:
    """`redacted_rows` and `marked` for records that are already JSONL lines: decoded only when changed.

    A trajectory redacted on import under the rules in force is not scanned again, but for its
    flags: the reward service wrote those afterwards, with evidence from the test run. The flags
    come beside the line (as the database returned them), so a clean line is never parsed.
    """
    first = True
    current = rules_version()
    for line, redacted_with, flags in lines:
        if redacted:
            if redacted_with == current:
                hit = bool(flags) and fires(orjson.dumps(flags).decode())
            else:
                hit = fires(line.decode())
            if hit:
                row, findings = redact_row(orjson.loads(line), where)
                tally.found(findings)
                line = orjson.dumps(row) + b"\n"
        elif first:
            line = orjson.dumps({UNREDACTED_MARK: True, **orjson.loads(line)}) + b"\n"
        first = False
        tally.count += 1
        yield line


def redacted_rows(rows: Iterator[dict[str, Any]], where: str, redacted: bool, tally: Tally) -> Iterator[dict[str, Any]]:
    for row in rows:
        if redacted and needs_redaction(row):
            row, findings = redact_row(row, where)
            tally.found(findings)
        tally.count += 1
        yield row


def mark_at_root(row: dict[str, Any]) -> dict[str, Any]:
    return {UNREDACTED_MARK: True, **row}


def mark_in_extra(row: dict[str, Any]) -> dict[str, Any]:
    """The mark where a format with a strict schema keeps a producer's own fields (ATIF's `extra`)."""
    extra = row.get("extra") or {}
    own = extra.get("crucible") or {}
    return {**row, "extra": {**extra, "crucible": {**own, UNREDACTED_MARK: True}}}


def marked(
    rows: Iterator[dict[str, Any]], redacted: bool, mark: Callable[[dict[str, Any]], dict[str, Any]] = mark_at_root
) -> Iterator[dict[str, Any]]:
    first = True
    for row in rows:
        if first and not redacted:
            row = mark(row)
        first = False
        yield row


def redact_file(name: str, content: bytes, redacted: bool, tally: Tally) -> bytes:
    if not redacted:
        return content
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return content
    clean, findings = redact_text(text, name)
    tally.found(findings)
    return clean.encode("utf-8") if findings else content
