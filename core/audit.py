"""The audit log's one verb: `record` who did what to which object.

Call it from services (not views), inside the same transaction as the change it
describes, so an action that rolls back leaves no record and a kept action always has one.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.db import models

from core.models import AuditEvent


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
