"""Agreement coefficients against values computed by hand (the working is in each docstring)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from annotation.agreement import (
    cohen_kappa,
    fleiss_kappa,
    fleiss_kappa_counts,
    krippendorff_alpha,
    majority,
    majority_agreement,
    observed_agreement,
    pairwise_cohen,
    scorer_agreement,
)
from tests.conftest import REPO

# Two raters, ten pairs, every category used, ties among them.
X2 = ["A", "A", "A", "B", "B", "tie", "tie", "A", "both_bad", "B"]
Y2 = ["A", "A", "B", "B", "B", "tie", "A", "A", "both_bad", "tie"]
TWO = [{"x": x, "y": y} for x, y in zip(X2, Y2, strict=True)]

# Three raters, six pairs; z did not judge the last one.
THREE = [
    {"x": "A", "y": "A", "z": "A"},
    {"x": "A", "y": "A", "z": "B"},
    {"x": "B", "y": "B", "z": "B"},
    {"x": "tie", "y": "tie", "z": "A"},
    {"x": "tie", "y": "B", "z": "both_bad"},
    {"x": "B", "y": "B"},
]


def test_cohens_kappa_of_two_raters_with_ties_equals_the_hand_computation() -> None:
    """Agreement on pairs 1,2,4,5,6,8,9: p_o = 7/10. Marginals x: A4 B3 tie2 bad1, y: A4 B3 tie2
    bad1, so p_e = (16 + 9 + 4 + 1)/100 = 0.30 and kappa = (0.7 - 0.3)/(1 - 0.3) = 4/7."""
    assert cohen_kappa(X2, Y2) == pytest.approx(4 / 7)
    (pair,) = pairwise_cohen(TWO)
    assert (pair.first, pair.second, pair.items) == ("x", "y", 10)
    assert pair.agreement == pytest.approx(0.7)
    assert pair.kappa == pytest.approx(4 / 7)


def test_two_raters_fleiss_and_alpha_equal_the_hand_computation() -> None:
    """Fleiss, n = 2: P̄ = 0.7 (agreeing pairs 1, others 0); pooled p = A .4 B .3 tie .2 bad .1,
    P̄e = .16 + .09 + .04 + .01 = .30, kappa = 0.4/0.7.
    Alpha: 20 values, coincidences weigh 1/(2-1); 3 disagreeing pairs give 6 off-diagonal
    coincidences; n_c = A8 B6 tie4 bad2, Σ_{c≠k} n_c n_k = 400 - 120 = 280;
    alpha = 1 - 19·6/280 = 166/280."""
    assert fleiss_kappa(TWO) == pytest.approx(0.4 / 0.7)
    assert krippendorff_alpha(TWO) == pytest.approx(166 / 280)
    assert observed_agreement(TWO) == pytest.approx(0.7)


def test_three_raters_fleiss_leaves_out_the_pair_with_fewer_judgements() -> None:
    """n = 3 over pairs 1-5 (pair 6 has two judgements and is left out).
    P_i = (Σ n_ic² - 3)/6: 1, 1/3, 1, 1/3, 0, so P̄ = 8/15.
    Pooled counts over 15 ratings: A6 B5 tie3 bad1, P̄e = (36 + 25 + 9 + 1)/225 = 71/225.
    kappa = (120 - 71)/(225 - 71) = 49/154 = 7/22."""
    assert fleiss_kappa(THREE) == pytest.approx(7 / 22)
    assert fleiss_kappa(THREE, raters=2) == fleiss_kappa(THREE[5:], raters=2) is None  # one category: undefined


def test_three_raters_alpha_uses_the_incomplete_pair_too() -> None:
    """Coincidences (weight 1/(m-1)): pair 1 AA 3; pair 2 AA 1, AB 1, BA 1; pair 3 BB 3;
    pair 4 tt 1, tA 1, At 1; pair 5 six different ordered pairs of .5; pair 6 (m = 2) BB 2.
    n_c: A 6, B 7, tie 3, bad 1; n = 17. Off-diagonal sum = 2 + 2 + 3 = 7;
    Σ_{c≠k} n_c n_k = 289 - 95 = 194; alpha = 1 - 16·7/194 = 82/194."""
    assert krippendorff_alpha(THREE) == pytest.approx(82 / 194)


def test_three_raters_observed_and_pairwise_agreement() -> None:
    """Observed: P_i = 1, 1/3, 1, 1/3, 0, 1 -> 11/18.
    x vs y over 6 pairs agree on 5; x: A2 B2 tie2, y: A2 B3 tie1, p_e = 12/36;
    kappa = (5/6 - 1/3)/(2/3) = 3/4."""
    assert observed_agreement(THREE) == pytest.approx(11 / 18)
    xy = next(p for p in pairwise_cohen(THREE) if (p.first, p.second) == ("x", "y"))
    assert (xy.items, xy.kappa) == (6, pytest.approx(0.75))
    xz = next(p for p in pairwise_cohen(THREE) if (p.first, p.second) == ("x", "z"))
    assert xz.items == 5


def test_agreement_with_the_majority_leaves_the_raters_own_vote_out() -> None:
    """z: pair 1 others A,A (agree), pair 2 others A,A but z chose B, pair 3 agree, pair 4
    others tie,tie but z chose A, pair 5 others tie,B: no majority. 2 of 4.
    x and y: pairs 1, 3 and 6 have an other-majority and they agree: 3 of 3."""
    rows = {row.rater: row for row in majority_agreement(THREE)}
    assert (rows["z"].rated, rows["z"].compared, rows["z"].agreed, rows["z"].rate) == (5, 4, 2, 0.5)
    assert (rows["x"].rated, rows["x"].compared, rows["x"].agreed) == (6, 3, 3)
    assert (rows["y"].compared, rows["y"].agreed) == (3, 3)


def test_wikipedias_fleiss_example_gives_0_210() -> None:
    """Wikipedia, "Fleiss' kappa", worked example: 14 raters, 10 items, 5 categories;
    P̄ = 0.378, P̄e = 0.213, kappa = 0.210."""
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    counts = [dict(enumerate(row)) for row in table]
    assert fleiss_kappa_counts(counts) == pytest.approx(0.2099, abs=5e-5)
    # The same table as individual ratings (raters are anonymous per item in Fleiss' design).
    ratings = [{f"r{i}": c for i, c in enumerate(c for c, n in enumerate(row) for _ in range(n))} for row in table]
    assert fleiss_kappa(ratings) == pytest.approx(0.2099, abs=5e-5)


def test_krippendorffs_textbook_example_gives_0_743() -> None:
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", nominal example:
    4 observers, 12 units, missing values; alpha = 0.743."""
    n = None
    observers = {
        "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
        "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
        "C": [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
        "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
    }
    units = [{o: v[u] for o, v in observers.items() if v[u] is not None} for u in range(12)]
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)


def test_undefined_figures_are_none_not_made_up() -> None:
    same = [{"x": "A", "y": "A"}, {"x": "A", "y": "A"}]
    assert cohen_kappa(["A", "A"], ["A", "A"]) is None
    assert fleiss_kappa(same) is None
    assert krippendorff_alpha(same) is None
    assert krippendorff_alpha([{"x": "A"}]) is None  # nothing pairable
    assert observed_agreement([]) is None
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa(["A"], ["A", "B"])
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa_counts([{"A": 2}, {"A": 3}])


def test_majority_is_strictly_more_than_half() -> None:
    assert majority(["A", "A", "B"]) == "A"
    assert majority(["A", "B"]) is None
    assert majority(["A", "A", "B", "tie"]) is None
    assert majority([]) is None


def test_scorer_agreement_counts_equal_scores_as_no_preference() -> None:
    """Pairs people settled on A/B: 5 (the tie verdict is out); scored 4 (one unscorable).
    (A, +.5) agree, (A, -1) no, (B, -.2) agree, (B, 0) scorer tie: 2/4 = .5, ties 1.
    Kappa people [A A B B] vs scorer [A B B tie]: p_o = .5, p_e = (2·1 + 2·2)/16 = .375,
    kappa = .125/.625 = 0.2."""
    result = scorer_agreement([("A", 0.5), ("A", -1.0), ("B", -0.2), ("B", 0.0), ("tie", 1.0), ("A", None)])
    assert (result.pairs, result.scored, result.agreed, result.ties) == (5, 4, 2, 1)
    assert result.agreement == 0.5
    assert result.kappa == pytest.approx(0.2)


def test_the_agreement_module_imports_without_django() -> None:
    code = "import sys, annotation.agreement; assert not any(m.startswith('django') for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)
