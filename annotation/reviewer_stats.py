"""Each reviewer's work: how much they judged, how fast, and how often people's verdict agreed with them.

Agreement is counted on decided pairs someone else also judged (or a researcher resolved): on a pair
only they judged, the verdict is their own vote and says nothing about them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.db.models import Avg, Count, Max

from annotation.agreement_report import verdict
from annotation.models import Comparison, Judgement

RECENT = 500  # judgements per reviewer the agreement is counted over, newest first
MAX_REVIEWERS = 200


@dataclass
class ReviewerRow:
    user: User
    judged: int
    sets: int
    last: datetime | None
    mean_seconds: float | None
    agreed: int  # of `compared`, the pairs whose verdict was their choice
    compared: int

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.compared if self.compared else None


@dataclass
class JudgementRow:
    judgement: Judgement
    verdict: str | None  # people's verdict on the pair, None while undecided
    others: int  # other reviewers' judgements of the pair


def reviewer_rows() -> list[ReviewerRow]:
    users = (
        User.objects.filter(judgements__isnull=False)
        .annotate(
            judged=Count("judgements", distinct=True),
            sets=Count("judgements__comparison__comparison_set", distinct=True),
            last=Max("judgements__created_at"),
            mean_ms=Avg("judgements__duration_ms"),
        )
        .order_by("-last", "username")[:MAX_REVIEWERS]
    )
    rows = []
    for user in users:
        recent = judgement_rows(user, RECENT)
        compared = [r for r in recent if r.verdict is not None and (r.others or r.judgement.comparison.resolution)]
        rows.append(
            ReviewerRow(
                user=user,
                judged=user.judged,  # type: ignore[attr-defined]  # annotated above
                sets=user.sets,  # type: ignore[attr-defined]
                last=user.last,  # type: ignore[attr-defined]
                mean_seconds=user.mean_ms / 1000 if user.mean_ms is not None else None,  # type: ignore[attr-defined]
                agreed=sum(r.verdict == r.judgement.choice for r in compared),
                compared=len(compared),
            )
        )
    return rows


def judgement_rows(user: User, limit: int) -> list[JudgementRow]:
    """The reviewer's newest judgements, each with people's verdict on its pair."""
    mine = list(
        Judgement.objects.filter(reviewer=user)
        .select_related("comparison__comparison_set")
        .order_by("-created_at", "-id")[:limit]
    )
    votes: dict[int, list[str]] = defaultdict(list)
    pairs = [j.comparison_id for j in mine]
    for pair_id, choice in Judgement.objects.filter(comparison_id__in=pairs).values_list("comparison_id", "choice"):
        votes[pair_id].append(choice)
    complete = {
        c.pk: len(votes[c.pk]) >= c.comparison_set.reviewers_per_pair
        for c in Comparison.objects.filter(pk__in=pairs).select_related("comparison_set")
    }
    rows = []
    for judgement in mine:
        pair = judgement.comparison
        decided = pair.resolution or complete.get(pair.pk, False)
        found = verdict(votes[pair.pk], pair.resolution) if decided else None
        rows.append(JudgementRow(judgement, found, len(votes[pair.pk]) - 1))
    return rows
