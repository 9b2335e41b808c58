from __future__ import annotations

from django.db import models

from tasks.models import Task
from trajectories.models import Trajectory


class Reward(models.Model):
    """A trajectory's score under one reward spec version; scoring again is a no-op."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="rewards")
    spec_version = models.CharField(max_length=120)
    reward = models.FloatField()
    resolved = models.BooleanField()
    pass_rate = models.FloatField()
    tests = models.JSONField(default=dict)
    flags = models.JSONField(default=list)
    breakdown = models.JSONField(default=dict)
    process = models.JSONField(default=list)  # [{step, reward, breakdown}]
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trajectory", "spec_version"], name="reward_once_per_spec")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.trajectory_id}@{self.spec_version}: {self.reward}"


class RewardSanity(models.Model):
    """Whether the reward tells the expected patch from empty and stub patches, per task."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="reward_sanity")
    spec_version = models.CharField(max_length=120)
    expected = models.FloatField()
    empty = models.FloatField()
    stubs = models.JSONField(default=dict)
    gap = models.FloatField()
    separates = models.BooleanField()
    created_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "spec_version"], name="sanity_once_per_spec")]

    def __str__(self) -> str:
        return f"{self.task_id}@{self.spec_version}: gap {self.gap}"
