from __future__ import annotations

from django.db import models

from core.models import LeasedRun
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


class ScoringFailure(models.Model):
    """Why the reward service could not score a trajectory under a spec version.

    The trajectory's page shows it with a retry; the sweep that redoes lost scoring leaves it
    alone (it would fail the same way) until someone asks again. Scoring it removes it.
    """

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="scoring_failures")
    spec_version = models.CharField(max_length=120)
    error = models.TextField()
    attempts = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trajectory", "spec_version"], name="scoring_failure_once_per_spec")
        ]

    def __str__(self) -> str:
        return f"{self.trajectory_id}@{self.spec_version}: {self.error[:80]}"


class ScoringRun(LeasedRun):
    """Verifying many trajectories at once: the `score` command, or POST /api/v1/rewards/score/.

    `filters` are the trajectory list's filters it was asked with (`imported`: the imported
    trajectories); `spec_text` the reward spec YAML it scores under (empty: the active spec), so
    the worker that runs it needs no file of the asker's. Idempotent per (trajectory, spec
    version): a trajectory already scored under the spec counts as `skipped`, and running the
    same request again adds nothing.
    """

    filters = models.JSONField(default=dict)
    spec_text = models.TextField(blank=True)
    spec_version = models.CharField(max_length=120)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    scored = models.PositiveIntegerField(default=0)  # scored by this run
    skipped = models.PositiveIntegerField(default=0)  # already scored under the spec
    failed = models.PositiveIntegerField(default=0)  # could not be scored (ScoringFailure says why)

    def __str__(self) -> str:
        return f"scoring run {self.pk}: {self.status} {self.done}/{self.total}"


class RewardCheck(LeasedRun):
    """Checking a suite's reward gap in the background: the suite page's button (reward_sanity does it inline).

    Each task with an expected patch gets its RewardSanity row under `spec_version`; `blind`
    keeps the task ids whose reward could not tell the expected patch from empty and stubs.
    """

    suite = models.ForeignKey("tasks.TaskSuite", on_delete=models.CASCADE, related_name="reward_checks")
    spec_version = models.CharField(max_length=120)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    blind = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"reward check {self.pk} of {self.suite_id}: {self.status} {self.done}/{self.total}"
