"""Reviewers' judgements: labels on steps, marks on trajectories, clearings of flags, and
pairwise comparisons of patches (sets, pairs, assignments, judgements)."""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.db import models

from core.limits import TASK_ID_MAX
from core.vocabulary import ComparisonChoice, ComparisonStrategy, choices
from tasks.models import Task, TaskSuite
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


class ComparisonSet(models.Model):
    """A named set of patch pairs for people to judge, with how they were drawn.

    `source` records where the pairs came from (suite, batch ids, training set, the two sides
    of a checkpoint comparison) so a preference export can carry that lineage.
    """

    Strategy = ComparisonStrategy

    name = models.SlugField(max_length=100, unique=True)
    suite = models.ForeignKey(
        TaskSuite, null=True, blank=True, on_delete=models.PROTECT, related_name="comparison_sets"
    )
    strategy = models.CharField(max_length=16, choices=choices(ComparisonStrategy))
    source = models.JSONField(default=dict, blank=True)
    # Each pair is judged by this many different reviewers (k).
    reviewers_per_pair = models.PositiveSmallIntegerField(default=1)
    max_per_task = models.PositiveIntegerField(default=5)
    # How long an assignment holds a pair for one reviewer before others may take it.
    lock_seconds = models.PositiveIntegerField(default=600)
    blind = models.BooleanField(default=True)
    stats = models.JSONField(default=dict, blank=True)  # what drawing the pairs found and skipped
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class Comparison(models.Model):
    """Two patches for one task. A and B are the pair's own sides, fixed when drawn.

    What a reviewer sees on the left is randomised per reviewer (Assignment.swapped); every
    judgement is stored in A/B terms so reviewers can be compared with each other.
    """

    comparison_set = models.ForeignKey(ComparisonSet, on_delete=models.CASCADE, related_name="comparisons")
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="comparisons")
    task_ref = models.CharField(max_length=TASK_ID_MAX)
    trajectory_a = models.ForeignKey(Trajectory, on_delete=models.PROTECT, related_name="+")
    trajectory_b = models.ForeignKey(Trajectory, on_delete=models.PROTECT, related_name="+")
    # The two trajectory ids, sorted: one pair is one pair whichever side each is on.
    pair_key = models.CharField(max_length=80)
    position = models.PositiveIntegerField(default=0)  # the order pairs are served in
    # Served first: a higher priority before a lower, then by position (a researcher's bulk action).
    priority = models.SmallIntegerField(default=0)
    # Only this reviewer is served the pair while it is reserved (bulk assignment); anyone otherwise.
    reserved_for = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    judgement_count = models.PositiveSmallIntegerField(default=0)
    # The current hold on this pair (see annotation.queue): at most one reviewer at a time.
    locked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    locked_until = models.DateTimeField(null=True, blank=True)
    # A disagreement resolved after discussion: the agreed choice and why.
    resolution = models.CharField(max_length=16, choices=choices(ComparisonChoice), blank=True)
    resolution_note = models.TextField(blank=True, max_length=MAX_COMMENT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["comparison_set", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["comparison_set", "pair_key"], name="one_pair_per_set"),
        ]
        indexes = [models.Index(fields=["comparison_set", "judgement_count", "position"], name="cmp_queue")]

    def __str__(self) -> str:
        return f"{self.comparison_set_id}:{self.pair_key}"


class Assignment(models.Model):
    """One reviewer was given one pair: when, which side was shown on the left, how it ended."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="assignments")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    # True when B was shown on the left for this reviewer.
    swapped = models.BooleanField(default=False)
    assigned_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    skipped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-assigned_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["comparison", "reviewer"], name="one_assignment_per_reviewer"),
        ]

    def __str__(self) -> str:
        return f"{self.comparison_id} to {self.reviewer_id}"


class Judgement(models.Model):
    """A reviewer's verdict on a pair, in A/B terms, with the reason (required) and rubric tags."""

    Choice = ComparisonChoice
    TAGS = ("correct", "minimal", "readable", "tested", "maintainable")

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="judgements")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judgements")
    choice = models.CharField(max_length=16, choices=choices(ComparisonChoice))
    reason = models.TextField(max_length=MAX_COMMENT)
    tags = models.JSONField(default=list, blank=True)
    swapped = models.BooleanField(default=False)  # what the reviewer saw, copied from the assignment
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["comparison", "reviewer"], name="one_judgement_per_reviewer"),
        ]

    def __str__(self) -> str:
        return f"{self.comparison_id}: {self.choice} by {self.reviewer_id}"
