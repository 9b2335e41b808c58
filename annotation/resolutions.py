"""Settling a pair reviewers disagreed on: a researcher records the agreed choice and why."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from annotation.models import MAX_COMMENT, Comparison
from core.vocabulary import ComparisonChoice, values


class ResolutionError(ValueError):
    """Bad input for a resolution; the message is shown to the researcher as is."""


@transaction.atomic
def resolve_pair(researcher: User, comparison: Comparison, choice: str, note: str) -> Comparison:
    """The agreed choice becomes the pair's verdict (preference exports, people-vs-reward).

    Reviewers' own judgements stay as they were: agreement figures measure what reviewers did,
    not what was decided afterwards. A later resolution replaces an earlier one.
    """
    if choice not in values(ComparisonChoice):
        raise ResolutionError(f"choice must be one of {', '.join(values(ComparisonChoice))}")
    note = note.strip()
    if not note:
        raise ResolutionError("say why: a resolution needs a note")
    # Signed, as there is no resolved_by column: the export carries who settled the pair.
    signed = f"{note}\n\n— {researcher.username}"
    if len(signed) > MAX_COMMENT:
        raise ResolutionError(f"the note is too long (at most {MAX_COMMENT - len(signed) + len(note)} characters)")
    Comparison.objects.filter(pk=comparison.pk).update(resolution=choice, resolution_note=signed)
    comparison.resolution, comparison.resolution_note = choice, signed
    return comparison
