"""Verbs for step labels and review marks."""

from __future__ import annotations

import logging

from django.contrib.auth.models import User
from django.db import transaction

from annotation.models import MAX_COMMENT, ReviewMark, StepLabel
from trajectories.models import Step, Trajectory

logger = logging.getLogger(__name__)


class AnnotationError(ValueError):
    pass


@transaction.atomic
def label_step(author: User, step: Step, label: str, comment: str = "") -> StepLabel:
    if label not in StepLabel.Label.values:
        raise AnnotationError(f"label must be one of {', '.join(StepLabel.Label.values)}")
    if len(comment) > MAX_COMMENT:
        raise AnnotationError(f"a comment is at most {MAX_COMMENT} characters")
    step_label = StepLabel.objects.create(step=step, author=author, label=label, comment=comment.strip())
    logger.info("step %d of trajectory %s labelled %s by user %s", step.step, step.trajectory_id, label, author.pk)
    return step_label


@transaction.atomic
def mark_for_review(author: User, trajectory: Trajectory, note: str = "") -> ReviewMark:
    if len(note) > MAX_COMMENT:
        raise AnnotationError(f"a note is at most {MAX_COMMENT} characters")
    mark = ReviewMark.objects.create(trajectory=trajectory, author=author, note=note.strip())
    logger.info("trajectory %s marked for review by user %s", trajectory.trajectory_id, author.pk)
    return mark
