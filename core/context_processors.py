from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from core.roles import RESEARCHER, has_role, user_role


def roles(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    # Templates ask "may this user launch things?" through this one name, so the rule
    # lives in core.roles and not in every template that shows a launch button.
    return {"crucible_role": user_role(user), "can_research": has_role(user, RESEARCHER)}
