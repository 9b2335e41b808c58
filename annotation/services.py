"""Verbs for step labels and review marks."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from annotation.models import ReviewMark, StepLabel
from trajectories.models import Step, Trajectory

MAX_COMMENT = 5000


class AnnotationError(ValueError):
    pass


@transaction.atomic
def label_step(author: User, step: Step, label: str, comment: str = "") -> StepLabel:
    if label not in StepLabel.Label.values:
        raise AnnotationError(f"label must be one of {', '.join(StepLabel.Label.values)}")
    if len(comment) > MAX_COMMENT:
        raise AnnotationError(f"a comment is at most {MAX_COMMENT} characters")
    return StepLabel.objects.create(step=step, author=author, label=label, comment=comment.strip())


@transaction.atomic
def mark_for_review(author: User, trajectory: Trajectory, note: str = "") -> ReviewMark:
    if len(note) > MAX_COMMENT:
        raise AnnotationError(f"a note is at most {MAX_COMMENT} characters")
    return ReviewMark.objects.create(trajectory=trajectory, author=author, note=note.strip())
