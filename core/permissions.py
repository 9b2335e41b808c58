from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from rest_framework.permissions import BasePermission

from core.roles import REVIEWER, has_role


def role_required(
    minimum: str = REVIEWER,
) -> Callable[[Callable[..., HttpResponseBase]], Callable[..., HttpResponseBase]]:
    """Page decorator: anonymous users go to the login page, outsiders get 403."""

    def decorator(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, minimum):
                raise PermissionDenied(f"This page needs the {minimum} role.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


class HasAnyRole(BasePermission):
    """API default: any Crucible role may read; writes declare their own minimum."""

    message = "Your account has no Crucible role (reviewer, researcher or admin)."

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, REVIEWER)
