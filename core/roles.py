"""The three roles of Crucible, as Django groups.

reviewer: reads everything, labels steps, judges comparisons.
researcher: reviewer's rights plus launching rollouts, training and evaluation.
admin: everything, including user management.
"""

from __future__ import annotations

from typing import Any

REVIEWER = "reviewer"
RESEARCHER = "researcher"
ADMIN = "admin"
ROLES = (REVIEWER, RESEARCHER, ADMIN)
# Each role's rights include those of the roles before it.
RANK = {REVIEWER: 1, RESEARCHER: 2, ADMIN: 3}


def user_role(user: Any) -> str | None:
    """The highest role the user holds, or None for an outsider."""
    if not getattr(user, "is_authenticated", False):
        return None
    if user.is_superuser:
        return ADMIN
    # Cached on the user object: a page asks several times per request.
    if hasattr(user, "_crucible_role"):
        cached: str | None = user._crucible_role
        return cached
    names = set(user.groups.values_list("name", flat=True))
    role = max((r for r in ROLES if r in names), key=RANK.__getitem__, default=None)
    user._crucible_role = role
    return role


def has_role(user: Any, minimum: str) -> bool:
    role = user_role(user)
    return role is not None and RANK[role] >= RANK[minimum]
