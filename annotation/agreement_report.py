"""A comparison set's agreement report: between reviewers, and between people and scorers.

Reward models must be calibrated against people regularly, or a policy learns what pleases the
model rather than people: for every pair people settled (a majority A or B, or a researcher's
resolution), does a scorer prefer the same side? The verified test reward is the first scorer;
the training app registers reward-model checkpoints as more (register_pair_scorer), so the
report grows without this module knowing about training. The arithmetic lives in
annotation.agreement (plain Python).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from django.contrib.auth.models import User
from django.db.models import Count, Q, QuerySet

from annotation import agreement
from annotation.models import Comparison, ComparisonSet, Judgement
from core.vocabulary import ComparisonChoice

logger = logging.getLogger(__name__)

# fn(comparison) -> score(A) - score(B), or None when the scorer cannot score the pair.
PairScorer = Callable[[Comparison], float | None]
Bucket = Literal["day", "week"]
# Up to this many days of judgements the trend is drawn per day, beyond it per week.
DAILY_SPAN_DAYS = 31
VERIFIED_REWARD = "verified_reward"
TRAJECTORY_FIELDS = ("id", "trajectory_id", "task_version", "final_reward", "success", "scored_spec")

# What the report loads for the scorers: the pair, and each side's identity and verified outcome.
SCORER_FIELDS = (
    "id",
    "comparison_set_id",
    "task_id",
    "task_ref",
    "position",
    "resolution",
    *(f"{side}__{name}" for side in ("trajectory_a", "trajectory_b") for name in TRAJECTORY_FIELDS),
)

_scorers: dict[str, PairScorer] = {}


def register_pair_scorer(name: str, fn: PairScorer) -> None:
    """Add (or replace) a scorer whose preferences the report compares with people's."""
    _scorers[name] = fn


def unregister_pair_scorer(name: str) -> None:
    _scorers.pop(name, None)


# Providers name scorers that come and go (a reward-model checkpoint saved after start-up).
ScorerProvider = Callable[[], dict[str, PairScorer]]
_providers: list[ScorerProvider] = []


def register_scorer_provider(fn: ScorerProvider) -> None:
    """Add a source of scorers asked afresh at every report (e.g. one per reward-model checkpoint)."""
    if fn not in _providers:
        _providers.append(fn)


def pair_scorers() -> dict[str, PairScorer]:
    out = dict(_scorers)
    for provider in _providers:
        try:
            out.update(provider())
        except Exception:
            # The report must still show people and the verified reward when, say, the
            # checkpoint table cannot be read.
            logger.exception("pair scorer provider %r failed", provider)
    return out


def verified_reward_difference(comparison: Comparison) -> float | None:
    """final_reward is written only by the reward service (verified); unscored sides give None."""
    a, b = comparison.trajectory_a.final_reward, comparison.trajectory_b.final_reward
    if a is None or b is None:
        return None
    return a - b


register_pair_scorer(VERIFIED_REWARD, verified_reward_difference)


def verdict(choices: Iterable[str], resolution: str = "") -> str | None:
    """People's verdict on a pair: a researcher's resolution, else the strict majority of votes."""
    if resolution:
        return resolution
    found = agreement.majority(choices)
    return None if found is None else str(found)


def disagreements(comparison_set: ComparisonSet, judge: User | None = None) -> QuerySet[Comparison]:
    """Pairs judged by two or more reviewers who did not all choose the same.

    With `judge` (a reviewer who may still be given pairs of this set), only the pairs whose
    other votes can no longer sway them: complete, resolved, or already judged by them. Kappa
    and alpha assume independent judgements; reading the others' reasons first breaks that.
    """
    pairs = (
        Comparison.objects.filter(comparison_set=comparison_set)
        .annotate(
            choice_kinds=Count("judgements__choice", distinct=True),
            judged=Count("judgements", distinct=True),
        )
        .filter(choice_kinds__gt=1)
        .order_by("position", "id")
    )
    if judge is not None:
        mine = Judgement.objects.filter(reviewer=judge).values("comparison_id")
        pairs = pairs.filter(Q(judged__gte=comparison_set.reviewers_per_pair) | ~Q(resolution="") | Q(id__in=mine))
    return pairs


def settled_for(comparison: Comparison, judge: User) -> bool:
    """Whether a reviewer may read the pair's votes and reasons (see disagreements)."""
    if comparison.resolution:
        return True
    judgements = list(comparison.judgements.all())  # the prefetched ones when the caller has them
    complete = len(judgements) >= comparison.comparison_set.reviewers_per_pair
    return complete or any(j.reviewer_id == judge.pk for j in judgements)


def agreement_report(comparison_set: ComparisonSet, bucket: Bucket | None = None) -> dict[str, Any]:
    """Every agreement figure for the set, JSON-ready (the agreement command prints it as is)."""
    judgements = list(
        Judgement.objects.filter(comparison__comparison_set=comparison_set)
        .order_by("created_at", "id")
        .values_list("comparison_id", "reviewer__username", "choice", "created_at")
    )
    by_pair: dict[int, dict[str, str]] = defaultdict(dict)
    for pair, reviewer, choice, _ in judgements:
        by_pair[pair][reviewer] = choice
    ratings = list(by_pair.values())
    comparisons = list(
        Comparison.objects.filter(comparison_set=comparison_set)
        .select_related("trajectory_a", "trajectory_b")
        # Building whole trajectory rows (JSON columns, patches) was most of the report's time;
        # a scorer that needs more (a reward model reads the patch) loads it on access.
        .only(*SCORER_FIELDS)
    )
    verdicts = {c.id: verdict(by_pair.get(c.id, {}).values(), c.resolution) for c in comparisons}
    differences = _score_pairs(comparisons)

    pairwise = agreement.pairwise_cohen(ratings)
    kappas = [p.kappa for p in pairwise if p.kappa is not None]
    raters = agreement.fleiss_raters(ratings)
    fleiss_items = sum(len(item) == raters for item in ratings) if raters else 0
    choices = {c: 0 for c in agreement.CATEGORIES}
    for _, _, choice, _ in judgements:
        choices[choice] = choices.get(choice, 0) + 1
    people = [verdicts[c.id] or "" for c in comparisons]
    return {
        "set": comparison_set.name,
        "reviewers_per_pair": comparison_set.reviewers_per_pair,
        "pairs": len(comparisons),
        "judged_pairs": len(ratings),
        "judgements": len(judgements),
        "items": sum(len(item) >= 2 for item in ratings),  # pairs with two or more judgements
        "choices": choices,
        "observed_agreement": agreement.observed_agreement(ratings),
        # Mean pairwise Cohen's kappa (Light's kappa): Cohen's own when there are two reviewers.
        "cohen_kappa": sum(kappas) / len(kappas) if kappas else None,
        "pairwise": [
            {"first": p.first, "second": p.second, "items": p.items, "agreement": p.agreement, "kappa": p.kappa}
            for p in pairwise
        ],
        "fleiss_kappa": agreement.fleiss_kappa(ratings, raters) if raters else None,
        "fleiss_raters": raters,
        "fleiss_items": fleiss_items,
        "fleiss_left_out": sum(len(item) >= 2 for item in ratings) - fleiss_items,
        "krippendorff_alpha": agreement.krippendorff_alpha(ratings),
        "reviewers": _reviewer_rows(judgements, ratings),
        "verdicts": {c: people.count(c) for c in agreement.CATEGORIES} | {"none": people.count("")},
        "disagreements": sum(len(set(item.values())) > 1 for item in ratings),
        "resolved": sum(bool(c.resolution) for c in comparisons),
        "scorers": {
            name: asdict(agreement.scorer_agreement([(verdicts[c.id] or "", diffs.get(c.id)) for c in comparisons]))
            for name, diffs in differences.items()
        },
        "trend": _trend(judgements, by_pair, differences, bucket),
    }


def _score_pairs(comparisons: list[Comparison]) -> dict[str, dict[int, float | None]]:
    out: dict[str, dict[int, float | None]] = {}
    for name, scorer in pair_scorers().items():
        scores: dict[int, float | None] = {}
        for comparison in comparisons:
            try:
                scores[comparison.id] = scorer(comparison)
            except Exception:
                # One broken scorer (a checkpoint whose files are gone) must not hide the
                # others' figures; the pair counts as unscored for it.
                logger.exception("pair scorer %s failed on comparison %s", name, comparison.id)
                scores[comparison.id] = None
        out[name] = scores
    return out


def _reviewer_rows(judgements: list[tuple[int, str, str, datetime]], ratings: list[dict[str, str]]) -> list[dict]:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {c: 0 for c in agreement.CATEGORIES})
    for _, reviewer, choice, _ in judgements:
        counts[reviewer][choice] = counts[reviewer].get(choice, 0) + 1
    rows = []
    for row in agreement.majority_agreement(ratings):
        rows.append(
            {
                "reviewer": row.rater,
                "judgements": row.rated,
                "choices": counts[str(row.rater)],
                "compared": row.compared,
                "agreed": row.agreed,
                "with_majority": row.rate,
            }
        )
    return rows


def _bucket_start(moment: datetime, bucket: Bucket) -> date:
    day = moment.astimezone(UTC).date()
    return day - timedelta(days=day.weekday()) if bucket == "week" else day


def _trend(
    judgements: list[tuple[int, str, str, datetime]],
    by_pair: dict[int, dict[str, str]],
    differences: dict[str, dict[int, float | None]],
    bucket: Bucket | None,
) -> dict[str, Any]:
    """Per day (or week) of judging: how often a judgement agreed with the pair's other
    reviewers' majority, and with each scorer's preference (A/B judgements only)."""
    if not judgements:
        return {"bucket": bucket or "day", "points": []}
    if bucket is None:
        span = judgements[-1][3] - judgements[0][3]
        bucket = "day" if span <= timedelta(days=DAILY_SPAN_DAYS) else "week"
    points: dict[date, dict[str, Any]] = {}
    for pair, reviewer, choice, created in judgements:
        point = points.setdefault(
            _bucket_start(created, bucket),
            {"judgements": 0, "compared": 0, "agreed": 0, "scorers": defaultdict(lambda: [0, 0])},
        )
        point["judgements"] += 1
        others = agreement.majority(c for r, c in by_pair[pair].items() if r != reviewer)
        if others is not None:
            point["compared"] += 1
            point["agreed"] += choice == others
        if choice not in (ComparisonChoice.A, ComparisonChoice.B):
            continue
        for name, diffs in differences.items():
            diff = diffs.get(pair)
            if diff is not None:
                tally = point["scorers"][name]
                tally[0] += 1
                tally[1] += agreement.preference_of(diff) == choice
    return {
        "bucket": bucket,
        "points": [
            {
                "start": start.isoformat(),
                "judgements": p["judgements"],
                "with_majority": p["agreed"] / p["compared"] if p["compared"] else None,
                "scorers": {name: (agreed / n if n else None) for name, (n, agreed) in p["scorers"].items()},
            }
            for start, p in sorted(points.items())
        ],
    }
