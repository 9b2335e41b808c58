"""Verbs for step labels, review marks and clearing a trajectory's flags."""

from __future__ import annotations

import logging
from collections.abc import Collection

from django.contrib.auth.models import User
from django.db import transaction

from annotation.models import MAX_COMMENT, FlagClearance, ReviewMark, StepLabel, flag_key
from core.audit import AuditAction, record
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


@transaction.atomic
def clear_flags(reviewer: User, trajectory: Trajectory, keys: Collection[str], reason: str) -> FlagClearance:
    """Record that `reviewer` judged these flags (by annotation.models.flag_key) harmless, and why.

    Only flags Crucible's reward service raised can be cleared: the flags an imported file
    claims are not the trajectory's flags. The keys must name flags the trajectory carries now,
    so a page left open while the trajectory was scored again cannot clear evidence nobody saw.
    """
    reason = reason.strip()
    if not reason:
        raise AnnotationError("say why the flags are harmless: the reason is kept with the clearing")
    if len(reason) > MAX_COMMENT:
        raise AnnotationError(f"a reason is at most {MAX_COMMENT} characters")
    # Locked so that a scoring finishing now cannot swap the flags between the check and the record.
    current = (
        Trajectory.objects.select_for_update().only("pk", "flags", "scored_spec", "scored_at").get(pk=trajectory.pk)
    )
    if current.scored_at is None:
        raise AnnotationError("this trajectory has not been scored by Crucible: it has no flags of its own to clear")
    carried = {flag_key(flag): flag for flag in current.flags if isinstance(flag, dict)}
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        raise AnnotationError("choose the flags you reviewed")
    missing = [key for key in wanted if key not in carried]
    if missing:
        raise AnnotationError(
            "the trajectory's flags changed since the page was loaded (it was scored again): reload it"
        )
    clearance = FlagClearance.objects.create(
        trajectory=current,
        reviewer=reviewer,
        flags=[carried[key] for key in wanted],
        spec_version=current.scored_spec,
        reason=reason,
    )
    record(
        reviewer,
        AuditAction.CLEAR_FLAG,
        current,
        detectors=sorted({str(carried[key].get("detector")) for key in wanted}),
        clearance=clearance.pk,
    )
    logger.info(
        "flags %s of trajectory %s cleared by user %s (spec %s)",
        ", ".join(sorted({str(carried[key].get("detector")) for key in wanted})),
        trajectory.trajectory_id,
        reviewer.pk,
        current.scored_spec,
    )
    return clearance
