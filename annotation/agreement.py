"""Agreement between raters on categorical judgements: pure functions on plain data.

Plain Python (no Django), so a notebook or a training subprocess can compute the same figures
from an export. A rating table is `list[dict[rater, category]]`: one dict per item (a pair of
patches), mapping each rater who judged it to the category chosen. Raters and categories are
any hashable values; Crucible's categories are A / B / tie / both_bad.

Every coefficient returns None where it is undefined (no usable items, or chance agreement is
already total, e.g. every rating is the same category): a number there would be made up.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from core.vocabulary import ComparisonChoice

# Any hashable values; typed Any because Mapping is invariant in its key type, so a
# dict[str, str] would not be a Mapping[Hashable, Hashable].
Rater = Any
Category = Any
Ratings = Sequence[Mapping[Any, Any]]

CATEGORIES: tuple[str, ...] = tuple(member.value for member in ComparisonChoice)

__all__ = [
    "CATEGORIES",
    "MajorityAgreement",
    "PairAgreement",
    "ScorerAgreement",
    "cohen_kappa",
    "fleiss_kappa",
    "fleiss_kappa_counts",
    "fleiss_raters",
    "krippendorff_alpha",
    "majority",
    "majority_agreement",
    "observed_agreement",
    "pairwise_cohen",
    "preference_of",
    "scorer_agreement",
]


def cohen_kappa(first: Sequence[Category], second: Sequence[Category]) -> float | None:
    """Cohen's kappa of two raters over the same items: (p_o - p_e) / (1 - p_e).

    p_o is the share of items on which they agree; p_e the agreement expected by chance from
    each rater's own category shares, Σ_c p1(c)·p2(c).
    """
    if len(first) != len(second):
        raise ValueError("both raters must rate the same items")
    n = len(first)
    if n == 0:
        return None
    p_o = sum(a == b for a, b in zip(first, second, strict=True)) / n
    left, right = Counter(first), Counter(second)
    p_e = sum(left[c] * right[c] for c in left) / (n * n)
    if p_e == 1:
        return None
    return (p_o - p_e) / (1 - p_e)


@dataclass(frozen=True)
class PairAgreement:
    first: Rater
    second: Rater
    items: int  # items both rated
    agreement: float | None  # share of those items with the same category
    kappa: float | None


def pairwise_cohen(ratings: Ratings) -> list[PairAgreement]:
    """Cohen's kappa for every pair of raters, over the items both of them rated.

    The mean of these (Light's kappa) is the usual two-rater figure for more raters; with
    exactly two raters it is Cohen's kappa itself.
    """
    raters = sorted({r for item in ratings for r in item}, key=repr)
    out = []
    for first, second in combinations(raters, 2):
        shared = [(item[first], item[second]) for item in ratings if first in item and second in item]
        if not shared:
            continue
        a = [x for x, _ in shared]
        b = [y for _, y in shared]
        agree = sum(x == y for x, y in shared) / len(shared)
        out.append(PairAgreement(first, second, len(shared), agree, cohen_kappa(a, b)))
    return out


def observed_agreement(ratings: Ratings) -> float | None:
    """Share of agreeing rater pairs, averaged over items rated at least twice.

    Per item, P_i = Σ_c n_c(n_c - 1) / (m(m - 1)) for m ratings of which n_c chose c: the chance
    that two different raters of the item, drawn at random, chose the same category.
    """
    shares = []
    for item in ratings:
        m = len(item)
        if m < 2:
            continue
        counts = Counter(item.values())
        shares.append(sum(n * (n - 1) for n in counts.values()) / (m * (m - 1)))
    return sum(shares) / len(shares) if shares else None


def fleiss_raters(ratings: Ratings) -> int:
    """The number of ratings per item Fleiss' kappa assumes: the most common count (ties → larger)."""
    counts = Counter(len(item) for item in ratings if len(item) >= 2)
    if not counts:
        return 0
    return max(counts, key=lambda m: (counts[m], m))


def fleiss_kappa(ratings: Ratings, raters: int | None = None) -> float | None:
    """Fleiss' kappa over the items that have exactly `raters` ratings.

    Fleiss' kappa assumes every item was rated by the same number of raters (who need not be
    the same people). Items with fewer ratings (a pair still in the queue) or more are LEFT OUT,
    not padded: padding would invent votes. `raters` defaults to the most common count
    (fleiss_raters); the report says how many items that left out.
    """
    n = fleiss_raters(ratings) if raters is None else raters
    if n < 2:
        return None
    table = [Counter(item.values()) for item in ratings if len(item) == n]
    return fleiss_kappa_counts(table)


def fleiss_kappa_counts(table: Sequence[Mapping[Category, int]]) -> float | None:
    """Fleiss' kappa from per-item category counts, every row summing to the same n.

    P_i = (Σ_c n_ic² - n) / (n(n - 1)); P̄ = mean P_i; p_c = Σ_i n_ic / (N·n); P̄_e = Σ_c p_c²;
    κ = (P̄ - P̄_e) / (1 - P̄_e).
    """
    rows = [row for row in table if sum(row.values()) > 0]
    if not rows:
        return None
    n = sum(rows[0].values())
    if n < 2 or any(sum(row.values()) != n for row in rows):
        raise ValueError("every item must have the same number of ratings (at least two)")
    items = len(rows)
    p_bar = sum((sum(v * v for v in row.values()) - n) / (n * (n - 1)) for row in rows) / items
    totals: Counter[Category] = Counter()
    for row in rows:
        totals.update(row)
    p_e = sum((count / (items * n)) ** 2 for count in totals.values())
    if p_e == 1:
        return None
    return (p_bar - p_e) / (1 - p_e)


def krippendorff_alpha(ratings: Ratings) -> float | None:
    """Krippendorff's alpha for nominal data; any number of raters, missing ratings allowed.

    Only items with at least two ratings are pairable. Coincidences: each ordered pair of
    ratings (c, k) from different raters of an item with m ratings adds 1/(m - 1) to o_ck;
    n_c = Σ_k o_ck and n = Σ_c n_c. Then α = 1 - (n - 1)·Σ_{c≠k} o_ck / Σ_{c≠k} n_c·n_k.
    """
    coincidences: defaultdict[tuple[Category, Category], float] = defaultdict(float)
    for item in ratings:
        values = list(item.values())
        m = len(values)
        if m < 2:
            continue
        for i, c in enumerate(values):
            for j, k in enumerate(values):
                if i != j:
                    coincidences[(c, k)] += 1 / (m - 1)
    marginals: defaultdict[Category, float] = defaultdict(float)
    for (c, _), weight in coincidences.items():
        marginals[c] += weight
    n = sum(marginals.values())
    if n <= 1:
        return None
    observed = sum(w for (c, k), w in coincidences.items() if c != k)
    expected = sum(marginals[c] * marginals[k] for c in marginals for k in marginals if c != k)
    if expected == 0:
        return None
    return 1 - (n - 1) * observed / expected


def majority(votes: Iterable[Category]) -> Category | None:
    """The category more than half of the votes chose, or None (no votes, or no such category)."""
    counts = Counter(votes)
    total = sum(counts.values())
    for category, count in counts.items():
        if count * 2 > total:
            return category
    return None


@dataclass(frozen=True)
class MajorityAgreement:
    rater: Rater
    rated: int  # items this rater rated
    compared: int  # of those, items where the OTHER raters had a majority
    agreed: int

    @property
    def rate(self) -> float | None:
        return self.agreed / self.compared if self.compared else None


def majority_agreement(ratings: Ratings) -> list[MajorityAgreement]:
    """Per rater: how often they chose what the majority of the item's other raters chose.

    The rater's own vote is left out of the majority, or everyone would agree with a majority
    they helped make. Items where the others have no majority (or there are no others) are
    not compared.
    """
    rated: Counter[Rater] = Counter()
    compared: Counter[Rater] = Counter()
    agreed: Counter[Rater] = Counter()
    for item in ratings:
        for rater, category in item.items():
            rated[rater] += 1
            others = majority(c for r, c in item.items() if r != rater)
            if others is None:
                continue
            compared[rater] += 1
            agreed[rater] += category == others
    return [MajorityAgreement(r, rated[r], compared[r], agreed[r]) for r in sorted(rated, key=repr)]


def preference_of(a_minus_b: float) -> str:
    """A scorer's preference from its score difference; equal scores prefer neither."""
    if a_minus_b > 0:
        return ComparisonChoice.A.value
    if a_minus_b < 0:
        return ComparisonChoice.B.value
    return ComparisonChoice.TIE.value


@dataclass(frozen=True)
class ScorerAgreement:
    pairs: int  # pairs with a people's A/B verdict
    scored: int  # of those, pairs the scorer could score
    agreed: int
    ties: int  # scored pairs where the scorer preferred neither side
    agreement: float | None  # agreed / scored; a scorer's tie counts as not agreeing
    kappa: float | None  # Cohen's kappa, people's verdict vs the scorer's preference (A/B/tie)


def scorer_agreement(verdicts: Sequence[tuple[str, float | None]]) -> ScorerAgreement:
    """Does a scorer (the verified reward, a reward model) prefer what people prefer?

    `verdicts` holds, per pair, the people's verdict and the scorer's a-minus-b difference
    (None when it could not score the pair). Only pairs where people preferred A or B count:
    a tie or both-bad verdict says no side should score higher.
    """
    decided = [(v, d) for v, d in verdicts if v in (ComparisonChoice.A, ComparisonChoice.B)]
    scored = [(v, preference_of(d)) for v, d in decided if d is not None]
    agreed = sum(v == p for v, p in scored)
    ties = sum(p == ComparisonChoice.TIE for _, p in scored)
    kappa = cohen_kappa([v for v, _ in scored], [p for _, p in scored]) if scored else None
    return ScorerAgreement(
        pairs=len(decided),
        scored=len(scored),
        agreed=agreed,
        ties=ties,
        agreement=agreed / len(scored) if scored else None,
        kappa=kappa,
    )
