from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from webapp.roles import user_role


def roles(request: HttpRequest) -> dict[str, Any]:
    return {"crucible_role": user_role(getattr(request, "user", None))}
