"""API tokens: a person's named keys for the REST API, stored only as a hash."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """One named key. The secret is shown once at creation; the row keeps its SHA-256.

    A stolen database backup then holds no usable key, and a key is revoked by
    stamping `revoked_at` (the row stays, so the profile page can show what existed).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)  # sha256 hex of the whole token
    prefix = models.CharField(max_length=16)  # the first characters, shown so a person can tell keys apart
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user} · {self.name} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None
