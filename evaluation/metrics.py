"""Evaluation statistics. Plain Python (no Django, no numpy/scipy): a training subprocess or a
notebook can import them, and every figure on the evaluation pages comes from here.

- pass@k: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
  Trained on Code"), 1 - C(n-c, k) / C(n, k), in its product form. The binomials overflow a
  float long before n = 1,000, and their ratio loses every digit; the product of (1 - k/i)
  terms stays within a few ulps of the exact value.
- pass^k: the chance that k samples drawn without replacement ALL succeed, C(c, k) / C(n, k)
  (a reliability figure: an agent that passes one time in two has pass@5 near 1 but pass^5
  near 0).
- Confidence intervals: the Wilson score interval, for a rate of successes and for a suite's
  pass@k / pass^k over its tasks (tasks, not samples, are the unit that varies between
  suites). It never collapses to a point: all-fail, all-pass and one-task suites still get
  an interval as wide as their evidence is thin.
- Pearson and Spearman correlation, and an exact sign test for paired per-task comparisons
  of two checkpoints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959964  # the two-sided 95 % normal quantile


def _check(n: int, c: int, k: int) -> None:
    if not (n >= 1 and 0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need n >= 1, 0 <= c <= n and 1 <= k <= n (got n={n}, c={c}, k={k})")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The probability that at least one of k samples (of n, c correct) is correct."""
    _check(n, c, k)
    if n - c < k:
        return 1.0  # every draw of k samples contains a correct one
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The probability that all k samples (of n, c correct, drawn without replacement) are correct."""
    _check(n, c, k)
    if c < k:
        return 0.0
    product = 1.0
    for i in range(k):
        product *= (c - i) / (n - i)
    return product


def mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("the mean of no values")
    return math.fsum(values) / len(values)


def wilson_ci(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a rate of `successes` in `n` (95 % by default).

    Unlike the normal approximation it never collapses to a point at 0 or n: no cheat seen in 17
    samples still leaves an upper bound of about 18 %. `successes` may be fractional: the sum of
    per-task rates (see `rate_ci`).
    """
    if n <= 0:
        raise ValueError("a rate needs at least one sample")
    if not 0 <= successes <= n:
        raise ValueError("successes must be between 0 and n")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0 and n the bound is exactly 0 or 1; rounding must not move it off (or show 1e-17).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def rate_ci(per_task: Sequence[float], z: float = Z95) -> tuple[float, float]:
    """95 % interval for a suite's mean of per-task rates in [0, 1] (pass@k, pass^k, a pass rate).

    The Wilson interval over the tasks, with the mean as the observed rate. A value in [0, 1]
    with mean p varies at most as much as a coin with P(heads) = p, so treating each task as one
    such trial bounds the spread from above: the interval is conservative, and, unlike a
    bootstrap over tasks, it does not shrink to a point when every task fails, every task
    passes or the suite has one task.
    """
    if not per_task:
        raise ValueError("a confidence interval needs at least one task")
    if any(not 0 <= v <= 1 for v in per_task):
        raise ValueError("per-task rates must lie in [0, 1]")
    return wilson_ci(math.fsum(per_task), len(per_task), z)


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None when it is undefined (fewer than two points or a constant series)."""
    if len(xs) != len(ys):
        raise ValueError("both series need the same length")
    if len(xs) < 2:
        return None
    mx, my = mean(xs), mean(ys)
    dx = [x - mx for x in xs]
    dy = [y - my for y in ys]
    sxx = math.fsum(d * d for d in dx)
    syy = math.fsum(d * d for d in dy)
    if sxx == 0 or syy == 0:
        return None
    r = math.fsum(a * b for a, b in zip(dx, dy, strict=True)) / math.sqrt(sxx * syy)
    return max(-1.0, min(1.0, r))


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks; ties share the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        shared = (i + j) / 2 + 1
        for m in range(i, j + 1):
            out[order[m]] = shared
        i = j + 1
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's r of the ranks (ties averaged)."""
    if len(xs) != len(ys):
        raise ValueError("both series need the same length")
    return pearson(ranks(xs), ranks(ys))


def sign_test(a: Sequence[float], b: Sequence[float]) -> dict[str, float | int]:
    """Exact two-sided sign test on paired per-task values (e.g. pass rates of two checkpoints).

    Ties carry no information about which side is better and are dropped, as the test defines.
    Exact (binomial), so it needs no seed and holds for the handful of tasks a suite may have.
    """
    if len(a) != len(b):
        raise ValueError("paired values need the same length")
    wins = sum(x > y for x, y in zip(a, b, strict=True))
    losses = sum(x < y for x, y in zip(a, b, strict=True))
    ties = len(a) - wins - losses
    n = wins + losses
    if n == 0:
        p = 1.0
    else:
        tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1))
        p = min(1.0, 2 * tail / 2**n)
    return {"wins": wins, "losses": losses, "ties": ties, "p_value": p}
