"""Redaction of secrets, internal host names and personal data before data leaves for training.

Plain Python. One choke point used on import (task statements, snapshots, observations,
patches) and again on export, so data that entered before a rule existed is still caught.

Interface (stable; the rules behind it grow):
- `redact_text(text, where)` -> `(clean_text, findings)`
- `redact_record(record, where)` -> `(clean_record, findings)`, walking every string in a
  JSON-like value; `where` names the field path prefix ("trajectory.steps[3].observation").
A `Finding` names the rule, where it was and a short fingerprint of the match, never the
matched text itself: the audit log must not become the place secrets are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Finding", "redact_record", "redact_text"]


@dataclass(frozen=True)
class Finding:
    rule: str  # e.g. "aws_access_key", "private_key_block", "internal_host", "email"
    where: str  # field path, e.g. "task.statement" or "trajectory.steps[2].observation"
    fingerprint: str  # first 12 hex of sha256 of the match: lets two findings be matched up


def redact_text(text: str, where: str) -> tuple[str, list[Finding]]:
    return text, []


def redact_record(record: Any, where: str) -> tuple[Any, list[Finding]]:
    if isinstance(record, str):
        return redact_text(record, where)
    if isinstance(record, dict):
        findings: list[Finding] = []
        out_dict: dict[Any, Any] = {}
        for key, value in record.items():
            out_dict[key], found = redact_record(value, f"{where}.{key}" if where else str(key))
            findings.extend(found)
        return out_dict, findings
    if isinstance(record, list):
        findings = []
        out_list: list[Any] = []
        for index, value in enumerate(record):
            clean, found = redact_record(value, f"{where}[{index}]")
            out_list.append(clean)
            findings.extend(found)
        return out_list, findings
    return record, []
