"""API tokens (a person's named keys for the REST API, stored only as a hash), and the fields every
leased background run shares (LeasedRun)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.vocabulary import RunStatus, choices


class LeasedRun(models.Model):
    """The lifecycle of long work done by a Celery job: a row moved queued -> running -> succeeded |
    failed | cancelled (core.states) by the worker that holds it under `attempt`, its liveness
    `heartbeat_at`; who asked and when it ran. Training runs, scoring runs and reward checks are
    rows of this shape, declared once here."""

    Status = RunStatus

    status = models.CharField(max_length=16, choices=choices(RunStatus), default=RunStatus.QUEUED, db_index=True)
    # The worker that claimed the row holds it under this attempt; its beats and its end are fenced by it.
    attempt = models.PositiveIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]


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


class AuditEvent(models.Model):
    """One thing a person did that someone may later need to account for.

    Written through `core.audit.record`, never edited. The actor's name is copied so
    the record survives the account; `detail` holds what the action needs to be
    understood (never a secret's value).
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)  # "" for the system itself
    action = models.CharField(max_length=40, db_index=True)  # an AuditAction value
    target_type = models.CharField(max_length=60, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    target_label = models.CharField(max_length=200, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.actor_name or 'system'} {self.action} {self.target_label}"
