"""Reviewers' judgements: labels on steps and marks on trajectories."""

from __future__ import annotations

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
