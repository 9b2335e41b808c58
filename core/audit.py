"""The audit log's one verb: `record` who did what to which object.

Call it from services (not views), inside the same transaction as the change it
describes, so an action that rolls back leaves no record and a kept action always has one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from django.db import models

from core.models import AuditEvent
from core.redaction import Finding


class AuditAction(StrEnum):
    LAUNCH = "launch"  # a batch, training run, eval run or validation run started
    CANCEL = "cancel"
    RESUME = "resume"
    EXPORT = "export"  # detail: kind, format, redacted (bool), count
    IMPORT = "import"
    CLEAR_FLAG = "clear_flag"
    ROLE_CHANGE = "role_change"  # detail: before, after
    TOKEN_CREATE = "token_create"  # noqa: S105 (an action name)
    TOKEN_REVOKE = "token_revoke"  # noqa: S105 (an action name)
    REDACT = "redact"  # detail: where, rule, count (never the matched text)
    GENERATE = "generate"  # how a synthetic task was made: builder, source, operator
    DELETE = "delete"
    CHANGE = "change"  # a suite's split or a task's test command: detail: field, before, after


def record(
    actor: Any,
    action: AuditAction | str,
    target: models.Model | str | None = None,
    **detail: Any,
) -> AuditEvent:
    """Write one audit event. `actor` is a user, None (the system) or AnonymousUser."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    if isinstance(target, models.Model):
        target_type = target._meta.label_lower
        target_id = str(target.pk)
        target_label = str(target)[:200]
    else:
        target_type, target_id, target_label = "", "", (target or "")[:200]
    return AuditEvent.objects.create(
        actor=user,
        actor_name=user.get_username() if user is not None else "",
        action=str(AuditAction(action)),
        target_type=target_type,
        target_id=target_id,
        target_label=target_label,
        detail=detail,
    )


# One import of a hostile file could otherwise write a row per distinct field path it made up.
MAX_REDACTION_EVENTS = 50
_INDEX_RE = re.compile(r"\[\d+\]")


RedactionCounts = Counter[tuple[str, str]]  # (rule, field with indices folded) -> how many


def count_findings(findings: Iterable[Finding], into: RedactionCounts | None = None) -> RedactionCounts:
    """Findings folded by rule and field (`steps[3].observation` -> `steps[].observation`).

    An import keeps this running count rather than every finding: memory stays bounded by
    the number of rules and fields, not by how many secrets a file holds.
    """
    counts: RedactionCounts = Counter() if into is None else into
    counts.update((f.rule, _INDEX_RE.sub("[]", f.where)) for f in findings)
    return counts


def record_redactions(
    actor: Any,
    target: models.Model | str | None,
    findings: Iterable[Finding] | RedactionCounts,
    **detail: Any,
) -> int:
    """One REDACT event per rule and field, with a count; returns the number of events written.

    Never the matched text: a finding carries only a fingerprint, and not even that is kept.
    A field whose finding was reported but not replaced (a patch's context line) says
    "(kept: ...)" in its `where`.
    """
    counts = findings if isinstance(findings, Counter) else count_findings(findings)
    groups = counts.most_common()
    if len(groups) > MAX_REDACTION_EVENTS:
        rest: RedactionCounts = Counter()
        for (rule, _where), count in groups[MAX_REDACTION_EVENTS:]:
            rest[(rule, "(other fields)")] += count
        groups = groups[:MAX_REDACTION_EVENTS] + rest.most_common()  # at most one more per rule
    for (rule, where), count in groups:
        record(actor, AuditAction.REDACT, target, where=where, rule=rule, count=count, **detail)
    return len(groups)
