"""Training: frozen, versioned choices of trajectories, training runs and their checkpoints."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.models import LeasedRun
from core.vocabulary import CheckpointKind, TrainingKind, choices


class TrainingSet(models.Model):
    """A frozen, versioned choice of trajectories, with the rule that chose them."""

    name = models.SlugField(max_length=100)
    version = models.PositiveIntegerField()
    rule = models.JSONField(default=dict)  # the filter and curation settings, as given
    trajectory_ids = models.JSONField(default=list)  # trajectory_id strings, in sampled order
    stats = models.JSONField(default=dict)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        # Version allocation relies on this constraint: two concurrent creations of one name
        # cannot both take the same version (see training.curation.build_training_set).
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="training_set_version")]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"


class TrainingRun(LeasedRun):
    """One training job (SFT, reward model, DPO or GRPO) launched through Celery.

    `config` is the submitted rl_config (model, environment, rl, data, logging, kind) as
    validated; `config_hash` names it for checkpoint lineage. `pgid` is the process group of
    the `accelerate launch` subprocess, so cancel can stop the whole tree.
    """

    Kind = TrainingKind

    name = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=16, choices=choices(TrainingKind))
    config = models.JSONField(default=dict)
    config_hash = models.CharField(max_length=64, blank=True)
    output_dir = models.CharField(max_length=500, blank=True)
    # The checkpoint this run starts from (a resume, or a fine-tune of an earlier result).
    resume_from = models.ForeignKey(
        "Checkpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="resumed_by"
    )
    pgid = models.IntegerField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    metrics = models.JSONField(default=dict, blank=True)  # the latest value of each metric
    # What it trains on: a training set's name@version or a file, and the train file's hash.
    dataset = models.CharField(max_length=500, blank=True)
    dataset_hash = models.CharField(max_length=64, blank=True)
    log_tail = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"run {self.pk}: {self.kind}"


class RunMetric(models.Model):
    """One logged step of a training run: the values the trainer reported at that step."""

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="metric_rows")
    step = models.PositiveIntegerField()
    values = models.JSONField(default=dict)
    logged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "step", "id"]
        indexes = [models.Index(fields=["run", "step"], name="run_metric_step")]

    def __str__(self) -> str:
        return f"{self.run_id}@{self.step}"


class Checkpoint(models.Model):
    """Saved weights with their lineage: usable as the hf policy (kind policy) or as a
    weighted reward component (kind reward), and comparable in evaluation."""

    Kind = CheckpointKind

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=choices(CheckpointKind), default=CheckpointKind.POLICY)
    path = models.CharField(max_length=500)  # a directory that from_pretrained loads
    run = models.ForeignKey(TrainingRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="checkpoints")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    base_model = models.CharField(max_length=500, blank=True)
    step = models.PositiveIntegerField(default=0)
    config_hash = models.CharField(max_length=64, blank=True)
    dataset = models.CharField(max_length=200, blank=True)  # e.g. a training set name@version or a file
    dataset_hash = models.CharField(max_length=64, blank=True)
    code_version = models.CharField(max_length=64, blank=True)
    metrics = models.JSONField(default=dict, blank=True)  # the run's metrics when this was saved
    # SHA-256 of its manifest in the object store (training.checkpoint_store); blank while only
    # the saving host has it. Kept here, not beside the files, so a tampered store cannot vouch for itself.
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["run", "step"], name="checkpoint_run_step")]

    def __str__(self) -> str:
        return self.name
