"""Evaluation statistics. Plain Python (no Django, no numpy/scipy): a training subprocess or a
notebook can import them, and every figure on the evaluation pages comes from here.

- pass@k: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
  Trained on Code"), 1 - C(n-c, k) / C(n, k), in its product form. The binomials overflow a
  float long before n = 1,000, and their ratio loses every digit; the product of (1 - k/i)
  terms stays within a few ulps of the exact value.
- pass^k: the chance that k samples drawn without replacement ALL succeed, C(c, k) / C(n, k)
  (a reliability figure: an agent that passes one time in two has pass@5 near 1 but pass^5
  near 0).
- Bootstrap confidence intervals over tasks (tasks, not samples, are the unit that varies
  between suites), Pearson and Spearman correlation, and an exact sign test for paired
  per-task comparisons of two checkpoints.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

BOOTSTRAP_ITERATIONS = 2000
BOOTSTRAP_SEED = 0


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


def wilson_ci(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a rate of `successes` in `n` (95 % by default).

    Unlike the normal approximation it never collapses to a point at 0 or n: no cheat seen in 17
    samples still leaves an upper bound of about 18 %.
    """
    if n <= 0:
        raise ValueError("a rate needs at least one sample")
    if not 0 <= successes <= n:
        raise ValueError("successes must be between 0 and n")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[[Sequence[float]], float] = mean,
    *,
    confidence: float = 0.95,
    iterations: int = BOOTSTRAP_ITERATIONS,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap over the given per-task values; the same seed gives the same interval."""
    if not values:
        raise ValueError("a confidence interval needs at least one value")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    rng = random.Random(seed)
    n = len(values)
    stats = sorted(statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(iterations))
    tail = (1 - confidence) / 2
    lo = stats[max(0, math.floor(tail * iterations))]
    hi = stats[min(iterations - 1, math.ceil((1 - tail) * iterations) - 1)]
    return lo, hi


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
