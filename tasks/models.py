from __future__ import annotations

from django.db import models

from core.limits import TASK_ID_MAX
from core.vocabulary import RunStatus, Split, TaskSource, ValidationStatus, choices
from tasks.lang_tests import PYTHON, language_of


class TaskSuite(models.Model):
    Split = Split

    name = models.SlugField(max_length=100, unique=True)
    split = models.CharField(max_length=16, choices=choices(Split), default=Split.TRAIN)
    description = models.TextField(blank=True)
    # How the last builder run went (tasks.builders.report.BuildReportJSON): candidates, built,
    # valid, and every skipped candidate with its reason. Empty for imported suites.
    build_report = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    """One executable coding task in the task-directory format of docs/formats.md."""

    Source = TaskSource
    Validation = ValidationStatus

    task_id = models.CharField(max_length=TASK_ID_MAX, unique=True)
    suite = models.ForeignKey(TaskSuite, on_delete=models.PROTECT, related_name="tasks")
    statement = models.TextField()
    source = models.CharField(max_length=32, choices=choices(TaskSource), default=Source.HANDWRITTEN)
    repo = models.CharField(max_length=200, blank=True)
    base_commit = models.CharField(max_length=64, blank=True)
    license = models.CharField(max_length=100, blank=True)
    test_command = models.CharField(max_length=1000, default="python -m pytest -q")
    tests_dest = models.CharField(max_length=500, default="tests")
    fail_to_pass = models.JSONField(default=list, blank=True)
    pass_to_pass = models.JSONField(default=list, blank=True)
    visible_tests = models.JSONField(default=list, blank=True)
    timeout_seconds = models.PositiveIntegerField(default=120)
    max_steps = models.PositiveIntegerField(default=30)
    difficulty = models.CharField(max_length=32, blank=True)
    tags = models.JSONField(default=list, blank=True)
    # metadata.json as given, unknown keys included, so an export loses nothing.
    metadata = models.JSONField(default=dict, blank=True)
    expected_patch = models.TextField(blank=True)
    # Content hashes of trees kept in the blob store under var/ (see tasks.storage).
    snapshot_hash = models.CharField(max_length=80)
    tests_hash = models.CharField(max_length=80)
    snapshot_files = models.JSONField(default=list, blank=True)  # [[path, size], ...]
    tests_files = models.JSONField(default=list, blank=True)
    version = models.CharField(max_length=80, db_index=True)
    validation_status = models.CharField(
        max_length=16, choices=choices(ValidationStatus), default=Validation.UNVALIDATED, db_index=True
    )
    validation_report = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["task_id"]
        indexes = [models.Index(fields=["suite", "task_id"])]

    def __str__(self) -> str:
        return self.task_id

    @property
    def language(self) -> str:
        """The language its metadata names (tasks.lang_tests): what runs its tests and what the
        agent's system prompt says; "python" when it names none."""
        return language_of(self.metadata) if isinstance(self.metadata, dict) else PYTHON


class ValidationRun(models.Model):
    """Validating a set of tasks in the background; the page follows it live."""

    Status = RunStatus

    suite = models.ForeignKey(TaskSuite, on_delete=models.CASCADE, related_name="validation_runs")
    status = models.CharField(max_length=16, choices=choices(RunStatus), default=Status.QUEUED)
    runs = models.PositiveSmallIntegerField(default=5)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    results = models.JSONField(default=dict, blank=True)  # task_id -> status
    error = models.TextField(blank=True)
    # Its tasks run as jobs all over the pool; each beats the run while it validates, and each
    # result recorded counts as a beat. Beats stopped: the sweep sends again what is missing.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"validation {self.pk} of {self.suite_id}: {self.status}"


class TaskEnvironment(models.Model):
    """One repository environment as built on this deployment (sandbox.environments), for the suite page.

    The venv itself lives on each worker host, keyed by `key` (its lock); this row keeps what
    people ask about it: what it holds, how big, how long it took, and the build log or the
    reason it could not be built.
    """

    spec_hash = models.CharField(max_length=16, unique=True)
    key = models.CharField(max_length=16, blank=True, db_index=True)
    repo = models.CharField(max_length=200, blank=True)
    spec = models.JSONField(default=dict)
    lock = models.JSONField(default=list, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    build_seconds = models.FloatField(default=0)
    built = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    log = models.TextField(blank=True)
    # The environment as a tar.gz in the object store (environments/<key>.tar.gz), for hosts that
    # have not built it; its SHA-256 here, so a changed object is refused. Empty: not published.
    archive_sha256 = models.CharField(max_length=64, blank=True)
    archive_bytes = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return f"environment {self.key or self.spec_hash} ({'built' if self.built else 'not built'})"
