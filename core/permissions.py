from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from rest_framework.permissions import SAFE_METHODS, BasePermission

from core.roles import RESEARCHER, REVIEWER, has_role


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


class RolePermission(BasePermission):
    """The UI's roles over the API: reviewers read, researchers write, admins do everything.

    A viewset names its exceptions in `action_roles` ({action: minimum role}): judging a pair
    is a reviewer's write; reading comparison sets is a researcher's read (their pages are
    too, since they show which trajectory is which side).
    """

    message = HasAnyRole.message

    def has_permission(self, request: Any, view: Any) -> bool:
        roles: dict[str, str] = getattr(view, "action_roles", {})
        minimum = roles.get(getattr(view, "action", None) or "") or (
            REVIEWER if request.method in SAFE_METHODS else RESEARCHER
        )
        if has_role(request.user, minimum):
            return True
        if has_role(request.user, REVIEWER):
            self.message = f"This needs the {minimum} role."
        return False
