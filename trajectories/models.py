from __future__ import annotations

from django.db import models

from tasks.models import Task, TaskSuite

ACTION_TYPES = ("read_file", "write_file", "edit_file", "run_command", "search", "run_tests", "submit")


class Trajectory(models.Model):
    """One agent attempt at one task: the guide's record plus provenance."""

    class Termination(models.TextChoices):
        SUBMITTED = "submitted"
        MAX_STEPS = "max_steps"
        TIMEOUT = "timeout"
        ERROR = "error"

    class Source(models.TextChoices):
        ONLINE = "online"
        OFFLINE = "offline"
        DISTILLED = "distilled"
        IMPORTED = "imported"

    trajectory_id = models.UUIDField(unique=True)
    schema_version = models.PositiveSmallIntegerField(default=1)
    # task_ref keeps the task id as recorded, so a trajectory for a task that is not
    # (yet) in this database still imports and exports unchanged.
    task_ref = models.CharField(max_length=200, db_index=True)
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
    final_reward = models.FloatField(null=True, blank=True)
    success = models.BooleanField(null=True, blank=True)
    termination = models.CharField(max_length=16, choices=Termination.choices, blank=True)
    flags = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.IMPORTED)
    step_count = models.PositiveIntegerField(default=0)
    # Top-level keys this schema does not know, kept so an export gives them back.
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
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
