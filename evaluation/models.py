"""Evaluation runs: a policy or checkpoint x an eval suite x n samples per task, with pass@k."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.vocabulary import RunStatus, choices


class EvalRun(models.Model):
    """One evaluation, run through a RolloutBatch: the same rollout machinery and verified rewards.

    `results` holds the report (pass@k, pass^k, CIs, per-task n/c, adversarial cheat rate) once
    every finished trajectory has been scored; `isolation` the suite-vs-training check as it was
    when the run started. A run started despite an overlap has `forced` set and `warning` says
    what it overlapped, so nobody reads its numbers as a clean evaluation.
    """

    Status = RunStatus

    suite = models.ForeignKey("tasks.TaskSuite", on_delete=models.PROTECT, related_name="eval_runs")
    policy_kind = models.CharField(max_length=16)  # core.vocabulary.PolicyKind
    model = models.CharField(max_length=500, blank=True)
    checkpoint = models.ForeignKey(
        "training.Checkpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="eval_runs"
    )
    samples = models.PositiveIntegerField()  # n per task
    k_values = models.JSONField(default=list)  # sorted, each <= samples
    temperature = models.FloatField()
    batch = models.OneToOneField(
        "trajectories.RolloutBatch", null=True, blank=True, on_delete=models.SET_NULL, related_name="eval_run"
    )
    status = models.CharField(max_length=16, choices=choices(RunStatus), default=RunStatus.QUEUED, db_index=True)
    results = models.JSONField(default=dict, blank=True)
    isolation = models.JSONField(default=dict, blank=True)
    forced = models.BooleanField(default=False)
    warning = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"eval {self.pk}: {self.policy_kind} {self.model} on {self.suite_id}"

    @property
    def label(self) -> str:
        """How a chart or table names this run: the checkpoint when there is one."""
        if self.checkpoint_id is not None and self.checkpoint is not None:
            return f"{self.checkpoint.name} (step {self.checkpoint.step})"
        return f"{self.policy_kind}:{self.model}"
