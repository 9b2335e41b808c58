"""pass@k, pass^k, Wilson intervals, correlations and the paired test on fixed data."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import pytest

from evaluation.metrics import (
    mean,
    pass_at_k,
    pass_hat_k,
    pearson,
    ranks,
    rate_ci,
    sign_test,
    spearman,
    wilson_ci,
)


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(comb(n - c, k), comb(n, k))


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [
        (1, 0, 1),
        (1, 1, 1),
        (5, 2, 1),
        (5, 2, 3),
        (10, 3, 5),
        (20, 1, 10),
        (200, 17, 100),
        (1000, 1, 1),
        (1000, 3, 10),
        (1000, 137, 100),
        (1000, 999, 500),
        (1000, 500, 1000),
    ],
)
def test_pass_at_k_equals_the_exact_binomial_value(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(float(exact_pass_at_k(n, c, k)), rel=1e-12, abs=1e-15)


def test_pass_at_k_at_n_1000_keeps_digits_the_naive_float_formula_loses() -> None:
    # C(2000, 1000) overflows a float; the product form never goes through the binomials.
    with pytest.raises(OverflowError):
        float(comb(2000, 1000))
    assert pass_at_k(2000, 3, 1000) == pytest.approx(float(exact_pass_at_k(2000, 3, 1000)), rel=1e-12)
    assert pass_at_k(1000, 5, 500) == pytest.approx(float(exact_pass_at_k(1000, 5, 500)), rel=1e-12)
    assert pass_at_k(1000, 0, 5) == 0.0 and pass_at_k(1000, 996, 5) == 1.0


def test_pass_hat_k_is_the_chance_that_all_k_succeed() -> None:
    for n, c, k in [(5, 2, 1), (5, 2, 2), (5, 2, 3), (10, 7, 4), (1000, 900, 50)]:
        assert pass_hat_k(n, c, k) == pytest.approx(float(Fraction(comb(c, k), comb(n, k))), rel=1e-12)
    assert pass_hat_k(5, 5, 5) == 1.0 and pass_hat_k(5, 4, 5) == 0.0
    # pass@1 and pass^1 are both the plain success rate.
    assert pass_at_k(8, 3, 1) == pytest.approx(pass_hat_k(8, 3, 1)) == pytest.approx(3 / 8)


def test_bad_arguments_are_refused() -> None:
    for n, c, k in [(0, 0, 1), (5, 6, 1), (5, 2, 0), (5, 2, 6), (5, -1, 1)]:
        with pytest.raises(ValueError, match="need n >= 1"):
            pass_at_k(n, c, k)


def test_the_wilson_interval_keeps_a_width_with_no_successes_all_successes_or_one_sample() -> None:
    # Known values (z = 1.96): 0 of 10 -> [0, 0.2775], 10 of 10 -> [0.7225, 1], 1 of 1 -> [0.2065, 1].
    assert wilson_ci(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson_ci(10, 10) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    assert wilson_ci(1, 1) == (pytest.approx(0.2065, abs=1e-4), 1.0)
    assert wilson_ci(0, 1) == (0.0, pytest.approx(0.7935, abs=1e-4))
    lo, hi = wilson_ci(3, 10)
    assert lo == pytest.approx(0.1078, abs=1e-4) and hi == pytest.approx(0.6032, abs=1e-4)
    with pytest.raises(ValueError):
        wilson_ci(0, 0)


def test_a_suites_pass_at_k_interval_never_collapses_all_fail_all_pass_or_one_task() -> None:
    # Per-task pass@5 from the unchanged estimator; the interval is Wilson over the tasks.
    all_fail = [pass_at_k(10, 0, 5)] * 4
    all_pass = [pass_at_k(10, 10, 5)] * 4
    assert all_fail == [0.0] * 4 and all_pass == [1.0] * 4
    lo, hi = rate_ci(all_fail)
    assert lo == 0.0 and hi == pytest.approx(0.4899, abs=1e-4)  # 4 failing tasks still allow 49 %
    lo, hi = rate_ci(all_pass)
    assert lo == pytest.approx(0.5101, abs=1e-4) and hi == 1.0
    for one_task in ([0.0], [1.0], [pass_at_k(5, 2, 1)]):
        lo, hi = rate_ci(one_task)
        assert lo <= one_task[0] <= hi and hi - lo > 0.75, one_task  # one task tells almost nothing
    # Between the extremes it brackets the mean, and more tasks narrow it.
    mixed = [pass_at_k(5, c, 1) for c in (0, 1, 2, 5, 5)]
    lo, hi = rate_ci(mixed)
    assert lo < mean(mixed) < hi
    wide, narrow = rate_ci([0.0, 1.0] * 5), rate_ci([0.0, 1.0] * 500)
    assert narrow[1] - narrow[0] < (wide[1] - wide[0]) / 5
    for bad in ([], [1.5], [-0.1]):
        with pytest.raises(ValueError):
            rate_ci(bad)


def test_pearson_and_spearman_on_known_series() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert pearson(xs, [2.0, 4.0, 6.0, 8.0, 10.0]) == pytest.approx(1.0)
    assert pearson(xs, [5.0, 4.0, 3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    assert pearson(xs, [2.0, 1.0, 4.0, 3.0, 5.0]) == pytest.approx(0.8)
    # Monotone but not linear: Spearman sees a perfect ordering, Pearson does not.
    cubes = [x**3 for x in xs]
    r = pearson(xs, cubes)
    assert spearman(xs, cubes) == pytest.approx(1.0) and r is not None and r < 0.95
    assert ranks([10.0, 20.0, 20.0, 5.0]) == [2.0, 3.5, 3.5, 1.0]
    assert spearman([1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]) == pytest.approx(0.8)
    assert pearson(xs, [1.0] * 5) is None and pearson([1.0], [2.0]) is None


def test_the_sign_test_is_exact_and_drops_ties() -> None:
    a = [1.0] * 9 + [0.5, 0.0]
    b = [0.0] * 9 + [0.5, 1.0]
    result = sign_test(a, b)
    assert (result["wins"], result["losses"], result["ties"]) == (9, 1, 1)
    assert result["p_value"] == pytest.approx(2 * (1 + 10) / 2**10)  # 0.0215
    assert sign_test([1.0, 0.0], [0.0, 1.0])["p_value"] == 1.0
    assert sign_test([0.3], [0.3])["p_value"] == 1.0
