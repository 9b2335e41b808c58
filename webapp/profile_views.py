"""The profile page: who you are, your role, and your API tokens (create, shown once; revoke).

Creating and revoking a token are audited here, in the transaction of the change: core.tokens
is also what the API's authentication calls, which is no action of a person's.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from core.audit import AuditAction, record
from core.models import ApiToken
from core.permissions import role_required
from core.tokens import TokenError, create_token, revoke_token


def _page(request: HttpRequest, *, secret: str = "", error: str = "", status: int = 200) -> HttpResponse:
    assert isinstance(request.user, User)
    tokens = ApiToken.objects.filter(user=request.user)
    response = render(
        request, "webapp/profile.html", {"tokens": tokens, "secret": secret, "error": error}, status=status
    )
    if secret:
        # The key is on this page and nowhere else: no cache may keep a copy.
        response["Cache-Control"] = "no-store"
    return response


@require_http_methods(["GET", "POST"])
@role_required()
def profile(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request)
    assert isinstance(request.user, User)
    try:
        with transaction.atomic():
            token, secret = create_token(request.user, request.POST.get("name", ""))
            record(request.user, AuditAction.TOKEN_CREATE, token, name=token.name, prefix=token.prefix)
    except TokenError as exc:
        return _page(request, error=str(exc), status=400)
    return _page(request, secret=secret)


@require_POST
@role_required()
def revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    assert isinstance(request.user, User)
    try:
        with transaction.atomic():
            token = revoke_token(request.user, token_id)
            record(request.user, AuditAction.TOKEN_REVOKE, token, name=token.name, prefix=token.prefix)
    except TokenError as exc:
        return _page(request, error=str(exc), status=404)
    return redirect("profile")
