"""Reviewers' judgements: labels on steps, marks on trajectories, clearings of flags."""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.db import models

from trajectories.models import Step, Trajectory

# One bound on reviewer free text, for the service and the forms alike.
MAX_COMMENT = 5000


class StepLabel(models.Model):
    """A reviewer's judgement of one step, visible to everyone who reviews it."""

    class Label(models.TextChoices):
        GOOD = "good_step", "good step"
        MISTAKE = "mistake", "mistake"
        REWARD_HACKING = "reward_hacking", "reward hacking"
        IRRELEVANT = "irrelevant", "irrelevant"
        OTHER = "other", "other"

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="labels")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="step_labels")
    label = models.CharField(max_length=32, choices=Label.choices)
    comment = models.TextField(blank=True, max_length=MAX_COMMENT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.step_id}: {self.label}"


class ReviewMark(models.Model):
    """'Someone should look at this trajectory', with why."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="review_marks")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="review_marks")
    note = models.TextField(blank=True, max_length=MAX_COMMENT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"review {self.trajectory_id}"


def flag_key(flag: object) -> str:
    """A short, stable name for one flag's exact content (detector, evidence, where).

    A clearing names the flags it cleared by these keys; a flag whose evidence changed (the
    trajectory was scored again and something else turned up) has another key, so it was not
    cleared by anyone yet.
    """
    canonical = json.dumps(flag, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class FlagClearance(models.Model):
    """A reviewer looked at a trajectory's flags and judged them harmless, and said why.

    Flags whose policy is `review` keep a trajectory out of training sets until cleared
    (training.curation); the row is the record of who cleared what, when and why.
    """

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="flag_clearances")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="flag_clearances")
    flags = models.JSONField(default=list)  # the cleared flags, exactly as the trajectory carried them
    spec_version = models.CharField(max_length=120)  # the reward spec that raised them
    reason = models.TextField(max_length=MAX_COMMENT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"flags of {self.trajectory_id} cleared by {self.reviewer_id}"

    def flag_keys(self) -> set[str]:
        return {flag_key(flag) for flag in self.flags}
