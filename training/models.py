"""Training data: frozen, versioned choices of trajectories (and, later, runs and checkpoints)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
