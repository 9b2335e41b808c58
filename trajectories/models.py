from __future__ import annotations

from django.db import models

from core.limits import TASK_ID_MAX
from core.vocabulary import DEFAULT_BACKEND, RunStatus, Termination, TrajectorySource, TrajectoryStatus, choices
from tasks.lang_tests import PYTHON
from tasks.models import Task, TaskSuite


class Trajectory(models.Model):
    """One agent attempt at one task: the trajectory record (docs/formats.md) plus provenance."""

    Termination = Termination
    Source = TrajectorySource
    Status = TrajectoryStatus

    trajectory_id = models.UUIDField(unique=True)
    # Rollouts made here belong to a batch; imported trajectories have none.
    batch = models.ForeignKey(
        "RolloutBatch", null=True, blank=True, on_delete=models.CASCADE, related_name="trajectories"
    )
    sample_index = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=choices(TrajectoryStatus), default=Status.FINISHED, db_index=True)
    attempt = models.PositiveIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    schema_version = models.PositiveSmallIntegerField(default=1)
    # task_ref keeps the task id as recorded, so a trajectory for a task that is not
    # (yet) in this database still imports and exports unchanged.
    task_ref = models.CharField(max_length=TASK_ID_MAX, db_index=True)
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories")
    suite = models.ForeignKey(TaskSuite, null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories")
    task_version = models.CharField(max_length=80, blank=True)
    base_commit = models.CharField(max_length=64, blank=True)
    prompt = models.TextField(blank=True)
    policy = models.JSONField(default=dict, blank=True)
    policy_kind = models.CharField(max_length=32, blank=True)
    policy_model = models.CharField(max_length=300, blank=True)
    sandbox = models.JSONField(default=dict, blank=True)
    patch = models.TextField(blank=True)
    # final_reward, success and flags are VERIFIED: only the reward service writes them, with
    # the spec version that computed them (scored_spec) and when (scored_at). A policy under
    # training can write any number into a file, so what an imported file says about its own
    # outcome is kept apart in `claimed` (trajectories.schema.ClaimedOutcome) and never trusted.
    final_reward = models.FloatField(null=True, blank=True)
    success = models.BooleanField(null=True, blank=True)
    termination = models.CharField(max_length=16, choices=choices(Termination), blank=True)
    flags = models.JSONField(default=list, blank=True)
    scored_spec = models.CharField(max_length=120, blank=True)
    scored_at = models.DateTimeField(null=True, blank=True)
    claimed = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=16, choices=choices(TrajectorySource), default=Source.IMPORTED)
    step_count = models.PositiveIntegerField(default=0)
    # Share of steps that repeat an earlier step's exact action (the curation filter "action validity").
    duplicate_rate = models.FloatField(default=0.0)
    replay_report = models.JSONField(default=dict, blank=True)  # the last replay's comparison
    # Top-level keys this schema does not know, kept so an export gives them back.
    extra = models.JSONField(default=dict, blank=True)
    # The version of the redaction rules the record was redacted under on import (empty: never,
    # e.g. an online rollout): an export under the same rules need not scan it again.
    redacted_with = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField()
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "task_ref", "sample_index"],
                name="one_rollout_per_sample",
                condition=models.Q(batch__isnull=False),
            ),
        ]
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="traj_created"),
            models.Index(fields=["suite", "-created_at"], name="traj_suite_created"),
            models.Index(fields=["task", "-created_at"], name="traj_task_created"),
            models.Index(fields=["success", "-created_at"], name="traj_success_created"),
            models.Index(fields=["final_reward"], name="traj_reward"),
            models.Index(fields=["policy_kind", "policy_model"], name="traj_policy"),
        ]

    def __str__(self) -> str:
        return str(self.trajectory_id)

    @property
    def language(self) -> str:
        """Its task's language (Task.language); "python" for a trajectory of no task we hold."""
        return self.task.language if self.task is not None else PYTHON

    @property
    def is_scored(self) -> bool:
        """Whether final_reward, success and flags were computed here (by the reward service)."""
        return self.scored_at is not None


class Step(models.Model):
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="steps")
    step = models.PositiveIntegerField()
    action_type = models.CharField(max_length=16)
    action_input = models.JSONField(null=True, blank=True)  # a string or an object, as recorded
    observation = models.TextField(blank=True)
    observation_truncated = models.BooleanField(default=False)
    thought = models.TextField(blank=True)
    reward = models.FloatField(null=True, blank=True)
    reward_breakdown = models.JSONField(default=dict, blank=True)
    timestamp = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["trajectory", "step"]
        constraints = [models.UniqueConstraint(fields=["trajectory", "step"], name="step_unique_per_trajectory")]

    def __str__(self) -> str:
        return f"{self.trajectory_id}#{self.step}"


class BatchDriver(models.TextChoices):
    """Who runs a batch's queued rollouts."""

    WORKERS = "workers"  # each a job on the `rollouts` queue
    COMMAND = "command"  # the `rollout` or `evaluate` command, in its own process, one after another


class RolloutBatch(models.Model):
    """A suite x samples per task x policy settings; each trajectory is a job on `rollouts`."""

    Status = RunStatus
    Driver = BatchDriver

    suite = models.ForeignKey(TaskSuite, on_delete=models.PROTECT, related_name="batches")
    policy_kind = models.CharField(max_length=16)  # core.vocabulary.PolicyKind
    model = models.CharField(max_length=300, blank=True)
    base_url = models.CharField(max_length=300, blank=True)  # openai policies
    samples = models.PositiveIntegerField(default=1)
    temperature = models.FloatField(default=0.8)
    top_p = models.FloatField(default=1.0)
    max_steps = models.PositiveIntegerField(default=30)
    max_new_tokens = models.PositiveIntegerField(default=256)
    sandbox = models.CharField(max_length=16, default=DEFAULT_BACKEND)
    seed = models.IntegerField(default=0)
    status = models.CharField(max_length=16, choices=choices(RunStatus), default=Status.QUEUED)
    # The workers re-enqueue what the broker lost only for their own batches; a command's queued
    # rows were never in the broker. A row whose attempt stopped beating is taken over either way.
    driver = models.CharField(max_length=16, choices=BatchDriver.choices, default=BatchDriver.WORKERS)
    created_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Archived (trajectories.archive): the steps live in the object store under archive_key and
    # the trajectories keep only their summaries until someone opens one.
    archived_at = models.DateTimeField(null=True, blank=True)
    archive_key = models.CharField(max_length=200, blank=True)
    archive_bytes = models.BigIntegerField(default=0)
    archived_steps = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"batch {self.pk}: {self.policy_kind} on {self.suite_id}"


def duplicate_rate(steps: list[tuple[str, object]]) -> float:
    """Share of (action_type, action_input) pairs already seen earlier in the trajectory."""
    import json

    seen: set[str] = set()
    repeats = 0
    for action_type, action_input in steps:
        key = action_type + json.dumps(action_input, sort_keys=True, default=str)
        repeats += key in seen
        seen.add(key)
    return round(repeats / len(steps), 4) if steps else 0.0


class SavedFilter(models.Model):
    """A reviewer's named trajectory-list query, e.g. 'hacking suspects on eval'."""

    owner = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="saved_filters")
    name = models.CharField(max_length=100)
    query = models.CharField(max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="saved_filter_name_per_owner")]

    def __str__(self) -> str:
        return self.name


class RetentionRule(models.Model):
    """Archive a suite's finished batches this many days after they finish (docs/deploy.md "Archive and retention")."""

    suite = models.OneToOneField(TaskSuite, on_delete=models.CASCADE, related_name="retention")
    archive_after_days = models.PositiveIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.suite_id}: archive after {self.archive_after_days} days"
