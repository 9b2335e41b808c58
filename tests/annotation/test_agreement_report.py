"""A comparison set's agreement report and `manage.py agreement`, on real judgements in the database."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command

from annotation.agreement import pairwise_cohen
from annotation.agreement_report import agreement_report, register_pair_scorer, unregister_pair_scorer
from annotation.models import Comparison, ComparisonSet
from tests.annotation.agreement_fixtures import Pair, day, make_set
from tests.annotation.test_agreement import THREE

pytestmark = pytest.mark.django_db

# THREE's votes with the verified rewards (A's, B's) of each pair and when they were judged.
REWARDS = [(1.0, 0.0), (0.0, 1.0), (0.0, 1.0), (1.0, 0.0), (1.0, 0.0), (0.5, 0.5)]


@pytest.fixture
def three() -> ComparisonSet:
    pairs = [Pair(votes, REWARDS[i], when=day(2 if i < 3 else 10)) for i, votes in enumerate(THREE)]
    return make_set("three", pairs, k=3)


@pytest.fixture
def oracle() -> Iterator[None]:
    """A stand-in for a reward-model checkpoint: prefers A on the first two pairs, B after,
    and fails on the last (a scorer that breaks must not take the report down)."""

    def score(comparison: Comparison) -> float | None:
        if comparison.position == 5:
            raise RuntimeError("checkpoint files are gone")
        return 1.0 if comparison.position < 2 else -1.0

    register_pair_scorer("test_oracle", score)
    yield
    unregister_pair_scorer("test_oracle")


def test_the_report_gives_the_hand_computed_figures_for_three_reviewers(three: ComparisonSet) -> None:
    r = agreement_report(three)
    assert (r["pairs"], r["judged_pairs"], r["judgements"], r["items"]) == (6, 6, 17, 6)
    assert r["fleiss_kappa"] == pytest.approx(7 / 22)
    assert (r["fleiss_raters"], r["fleiss_items"], r["fleiss_left_out"]) == (3, 5, 1)
    assert r["krippendorff_alpha"] == pytest.approx(82 / 194)
    assert r["observed_agreement"] == pytest.approx(11 / 18)
    kappas = [p.kappa for p in pairwise_cohen(THREE)]
    assert r["cohen_kappa"] == pytest.approx(sum(kappas) / 3)  # type: ignore[arg-type]
    z = next(row for row in r["reviewers"] if row["reviewer"] == "z")
    assert (z["judgements"], z["compared"], z["agreed"], z["with_majority"]) == (5, 4, 2, 0.5)
    assert z["choices"] == {"A": 2, "B": 2, "tie": 0, "both_bad": 1}
    assert r["disagreements"] == 3
    assert r["verdicts"] == {"A": 2, "B": 2, "tie": 1, "both_bad": 0, "none": 1}


def test_people_are_compared_with_the_verified_reward_and_each_registered_scorer(
    three: ComparisonSet, oracle: None
) -> None:
    """Settled on A/B: pairs 1 (A), 2 (A), 3 (B), 6 (B). Reward prefers A, B, B, neither:
    2 of 4 agree, one reward tie; kappa 0.2 (worked in test_agreement). The oracle prefers
    A, A, B and cannot score pair 6: 3 of 3."""
    scorers = agreement_report(three)["scorers"]
    verified = scorers["verified_reward"]
    assert (verified["pairs"], verified["scored"], verified["agreed"], verified["ties"]) == (4, 4, 2, 1)
    assert verified["agreement"] == 0.5
    assert verified["kappa"] == pytest.approx(0.2)
    assert scorers["test_oracle"] | {"kappa": None} == {
        "pairs": 4,
        "scored": 3,
        "agreed": 3,
        "ties": 0,
        "agreement": 1.0,
        "kappa": None,
    }


def test_a_researchers_resolution_is_the_verdict_people_are_scored_on(three: ComparisonSet) -> None:
    Comparison.objects.filter(comparison_set=three, position=1).update(resolution="B", resolution_note="agreed")
    verified = agreement_report(three)["scorers"]["verified_reward"]
    assert (verified["agreed"], verified["agreement"]) == (3, 0.75)  # pair 2 now B, as the reward says


def test_the_trend_buckets_judgements_by_day_or_week(three: ComparisonSet) -> None:
    """Day 2: pairs 1-3; judgements with an other-majority 7, agreeing 6; A/B judgements vs the
    reward: pair 1 3/3, pair 2 1/3 (only z chose B), pair 3 3/3 -> 7/9.
    Day 10: pairs 4-6; other-majority 3, agreeing 2 (z's A on pair 4 is the miss); reward: z's A
    on pair 4 agrees, y's B on pair 5 does not, pair 6's reward tie agrees with neither B -> 1/4."""
    trend = agreement_report(three)["trend"]
    assert trend["bucket"] == "day"
    first, second = trend["points"]
    assert (first["start"], first["judgements"]) == ("2026-03-02", 9)
    assert first["with_majority"] == pytest.approx(6 / 7)
    assert first["scorers"]["verified_reward"] == pytest.approx(7 / 9)
    assert (second["start"], second["judgements"]) == ("2026-03-10", 8)
    assert second["with_majority"] == pytest.approx(2 / 3)
    assert second["scorers"]["verified_reward"] == 0.25
    weekly = agreement_report(three, bucket="week")["trend"]
    assert [p["start"] for p in weekly["points"]] == ["2026-03-02", "2026-03-09"]  # Mondays


def test_the_agreement_command_prints_json(three: ComparisonSet) -> None:
    out = io.StringIO()
    call_command("agreement", "--set", "three", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["fleiss_kappa"] == pytest.approx(7 / 22)
    assert report["krippendorff_alpha"] == pytest.approx(82 / 194)
    assert report["items"] == 6
    assert {row["reviewer"] for row in report["reviewers"]} == {"x", "y", "z"}
    assert report["scorers"]["verified_reward"]["agreement"] == 0.5


def test_the_agreement_command_prints_a_table_and_refuses_an_unknown_set(three: ComparisonSet) -> None:
    out = io.StringIO()
    call_command("agreement", "--set", "three", stdout=out)
    text = out.getvalue()
    assert "Fleiss' kappa        0.318" in text
    assert "Krippendorff's alpha 0.423" in text
    assert "verified_reward" in text
    with pytest.raises(CommandError, match="no comparison set named 'nope'"):
        call_command("agreement", "--set", "nope")


def test_an_empty_set_reports_no_figures_rather_than_made_up_ones() -> None:
    empty = make_set("empty", [])
    r = agreement_report(empty)
    assert r["judgements"] == 0
    assert r["cohen_kappa"] is r["fleiss_kappa"] is r["krippendorff_alpha"] is None
    assert r["trend"]["points"] == []
