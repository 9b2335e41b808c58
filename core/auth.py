"""DRF authentication by Crucible API token: `Authorization: Bearer <key>` or `Token <key>`."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from core.tokens import TOKEN_PREFIX, token_user


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("bearer", "token")

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower().decode(errors="replace") not in self.keywords:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: give exactly one token after the keyword.")
        try:
            secret = parts[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token header: the token is not text.") from None
        if not secret.startswith(TOKEN_PREFIX):
            # Not one of ours: DRF's own TokenAuthentication (next in the list) may know it.
            if parts[0].lower() == b"token":
                return None
            raise exceptions.AuthenticationFailed("Invalid token.")
        found = token_user(secret)
        if found is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return found

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
