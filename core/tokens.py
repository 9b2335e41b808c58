"""Creating, checking and revoking API tokens (the verbs behind the profile page and core.auth)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from core.models import ApiToken

# Every Crucible key starts with this, so core.auth can tell it from a DRF authtoken key
# (both may arrive as "Token <key>") and a leaked key is easy to find with a secret scanner.
TOKEN_PREFIX = "crc_"  # noqa: S105 - a public marker, not a secret
SHOWN_PREFIX = 12  # characters of the key kept in clear to tell keys apart
MAX_ACTIVE = 20
# last_used_at is a hint for people, not an audit log: one write per key per minute at most.
TOUCH_EVERY = timedelta(minutes=1)


class TokenError(ValueError):
    pass


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def create_token(user: User, name: str) -> tuple[ApiToken, str]:
    """A new key for `user`: the row, and the secret that is never stored or shown again."""
    name = " ".join(name.split())
    if not name:
        raise TokenError("Give the token a name, so you can tell it apart later.")
    if len(name) > ApiToken._meta.get_field("name").max_length:  # type: ignore[operator]
        raise TokenError("The token's name is too long (100 characters at most).")
    active = ApiToken.objects.select_for_update().filter(user=user, revoked_at=None)
    if active.count() >= MAX_ACTIVE:
        raise TokenError(f"You already have {MAX_ACTIVE} active tokens; revoke one first.")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, token_hash=hash_token(secret), prefix=secret[:SHOWN_PREFIX])
    return token, secret


@transaction.atomic
def revoke_token(user: User, token_id: int) -> ApiToken:
    token = ApiToken.objects.select_for_update().filter(user=user, pk=token_id).first()
    if token is None:
        raise TokenError("No such token.")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def token_user(secret: str) -> tuple[User, ApiToken] | None:
    """The active user behind a presented key, or None (unknown, revoked or inactive user)."""
    token = ApiToken.objects.select_related("user").filter(token_hash=hash_token(secret), revoked_at=None).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > TOUCH_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token.user, token
