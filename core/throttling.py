"""API rate limits: per user, per anonymous address, and a tighter one for launches.

Rates live in REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] (set from CRUCIBLE_API_RATE_* in
settings) and are read when a request comes, not when this module is imported, so a test's
override_settings and a deployment's environment both take effect. A refused request is a
429 problem with Retry-After (core.api_errors).
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


def _rate(scope: str) -> str | None:
    rate = api_settings.DEFAULT_THROTTLE_RATES.get(scope)
    return None if rate is None else str(rate)


class UserThrottle(UserRateThrottle):
    scope = "user"

    def get_rate(self) -> str | None:
        return _rate(self.scope)


class AnonThrottle(AnonRateThrottle):
    scope = "anon"

    def get_rate(self) -> str | None:
        return _rate(self.scope)


class LaunchThrottle(UserRateThrottle):
    """Writes (launches, judgements, new sets) by one user: each may start minutes of sandbox work."""

    scope = "launch"

    def get_rate(self) -> str | None:
        return _rate(self.scope)

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().allow_request(request, view)
