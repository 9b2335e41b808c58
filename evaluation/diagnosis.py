"""Reward vs capability: read a training reward curve beside eval pass@k per checkpoint, and
name what the shape means (docs/training.md "Evaluating policies and checkpoints"). Plain Python.

| symptom                                  | likely cause                                      |
|------------------------------------------|---------------------------------------------------|
| reward rises, pass@k does not move        | the policy learned the reward's surface: gamed    |
| reward flat, pass@k rises                 | still exploring; the reward misses real progress  |
| reward and pass@k swing together          | unstable environment or very uneven difficulty    |
| every reward reaches ~1 quickly           | leaked tests or a too-lenient reward              |
| reward rises or holds, pass@k falls       | the reward pays for something that is not solving |

The reward curve is a list of (step, value) pairs; rewards live in [-1, 1], so its thresholds
are absolute changes (a 0.2 rise is large). pass@k is a list of `Point`s, each carrying the
95 % interval its evaluation computed, and a pass@k shape counts only when it leaves that
noise: a small suite's wide intervals must not turn chance into a diagnosis. "Does not move"
is a claim too, so it needs intervals narrow enough to have seen a move (PASS_MOVE) had there
been one; pass@k that swings has no trend, and a swing is never read as gaming.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from evaluation.metrics import pearson, spearman

Series = list[tuple[float, float]]
Code = Literal["reward_gamed", "reward_misses_progress", "unstable", "leak_or_lenient", "pass_at_k_falling"]

RISE = 0.2  # a reward change at least this large over the run counts as "rising"
FLAT = 0.05  # a reward change below this counts as "does not move"
SWING = 0.1  # a reversal at least this large counts as a swing (pass@k's must also leave the noise)
SWINGS_MIN = 2  # reversals in both series for "swinging"
NEAR_ONE = 0.95
EARLY = 0.25  # "quickly": within the first quarter of the run's steps
PASS_MOVE = 0.1  # the smallest change of pass@k over a run worth a name, up or down


class Point(NamedTuple):
    """One evaluated checkpoint: its training step, pass@k, and the 95 % interval of that pass@k."""

    step: float
    value: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class Diagnosis:
    code: Code
    symptom: str
    cause: str
    action: str
    # which evidence to look at: cheat_flags | flaky_tasks | leak_report | trajectories | comparison
    evidence: str


ROWS: dict[Code, tuple[str, str, str, str]] = {
    "reward_gamed": (
        "reward rises while pass@k stays flat",
        "the policy learned surface features of the reward: it is being gamed",
        "read trajectories with cheat flags; make tests read-only and add the missing anti-cheat check",
        "cheat_flags",
    ),
    "reward_misses_progress": (
        "reward stays flat while pass@k rises",
        "the policy is still exploring and the reward does not capture its real progress",
        "add process rewards for progress (fewer failing tests) or a finer outcome reward",
        "trajectories",
    ),
    "unstable": (
        "reward and pass@k swing up and down together",
        "an unstable environment or a large spread of task difficulty",
        "quarantine flaky tasks, pin dependencies, balance the difficulty of each batch",
        "flaky_tasks",
    ),
    "leak_or_lenient": (
        "every reward reaches about 1 quickly",
        "the tests leaked into training data, or the reward is too lenient",
        "check the isolation / leak report and whether the tests can pass without a real fix",
        "leak_report",
    ),
    "pass_at_k_falling": (
        "reward rises or holds while pass@k falls",
        "the reward pays for something other than solving tasks, and the policy trades real capability for it",
        "compare the last checkpoint with the first task by task and read the trajectories of the tasks it lost; "
        "fix the reward before training further",
        "comparison",
    ),
}


def _diagnosis(code: Code) -> Diagnosis:
    symptom, cause, action, evidence = ROWS[code]
    return Diagnosis(code, symptom, cause, action, evidence)


def change(series: Series) -> float:
    """Least-squares slope times the span of steps: the trend's rise, robust to one noisy end."""
    if len(series) < 2:
        return 0.0
    xs = [float(s) for s, _ in series]
    ys = [float(v) for _, v in series]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope * (max(xs) - min(xs))


def reversals(values: Sequence[float], half_widths: Sequence[float] | None = None) -> list[int]:
    """Indices where the direction changes by at least SWING on both sides; with half-widths (95 %
    intervals of each value), each of the two moves must also leave the noise of its two ends."""
    widths = half_widths if half_widths is not None else [0.0] * len(values)

    def moved(i: int) -> bool:
        step = values[i + 1] - values[i]
        return abs(step) >= SWING and abs(step) > math.hypot(widths[i], widths[i + 1])

    return [
        i
        for i in range(1, len(values) - 1)
        if (values[i] - values[i - 1]) * (values[i + 1] - values[i]) < 0 and moved(i - 1) and moved(i)
    ]


@dataclass(frozen=True)
class Trend:
    """pass@k over a run: the fitted change, the half-width of its 95 % interval (each point's
    interval carried through the least-squares fit), and where it turns beyond noise."""

    change: float
    noise: float
    turns: tuple[int, ...]

    @property
    def rising(self) -> bool:
        return len(self.turns) < SWINGS_MIN and self.change >= PASS_MOVE and self.change > self.noise

    @property
    def falling(self) -> bool:
        return len(self.turns) < SWINGS_MIN and self.change <= -PASS_MOVE and -self.change > self.noise

    @property
    def flat(self) -> bool:
        """Shown not to move: the change's whole interval lies within PASS_MOVE, and no swing."""
        return not self.turns and abs(self.change) + self.noise < PASS_MOVE


def pass_trend(points: Sequence[Point]) -> Trend | None:
    """The trend of pass@k points; None with fewer than two checkpoint steps (no trend to fit)."""
    points = sorted(points)
    xs = [p.step for p in points]
    if len(set(xs)) < 2:
        return None
    mx = math.fsum(xs) / len(xs)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    span = max(xs) - min(xs)
    # The change is span * sum(w_i * y_i) with w_i = (x_i - mean) / sxx: independent points with
    # half-widths h_i give it a half-width of span * sqrt(sum((w_i * h_i)^2)).
    noise = span * math.sqrt(math.fsum(((x - mx) / sxx * p.half_width) ** 2 for x, p in zip(xs, points, strict=True)))
    turns = reversals([p.value for p in points], [p.half_width for p in points])
    return Trend(change([(p.step, p.value) for p in points]), noise, tuple(turns))


def aligned(reward: Series, points: Sequence[Point]) -> list[tuple[float, float]]:
    """(reward, pass@k) pairs: each eval point beside the last training reward logged at or before its step."""
    ordered = sorted(reward)
    out = []
    for point in sorted(points):
        before = [r for s, r in ordered if s <= point.step]
        if before:
            out.append((before[-1], point.value))
        elif ordered:
            out.append((ordered[0][1], point.value))
    return out


def correlations(reward: Series, points: Sequence[Point]) -> dict[str, float | None]:
    pairs = aligned(reward, points)
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    return {"pearson": pearson(xs, ys), "spearman": spearman(xs, ys), "points": len(pairs)}


def diagnose(reward: Series, pass_at_k: Sequence[Point]) -> list[Diagnosis]:
    """Every row of the table above the two series match (none: nothing to worry about yet)."""
    found: list[Diagnosis] = []
    if len(reward) < 2:
        return found
    reward = sorted(reward)
    points = sorted(pass_at_k)
    first, last = reward[0][0], reward[-1][0]
    early = first + EARLY * (last - first)
    reached = next((s for s, v in reward if v >= NEAR_ONE), None)
    if reached is not None and reached <= early and all(v >= NEAR_ONE - 0.1 for s, v in reward if s >= reached):
        found.append(_diagnosis("leak_or_lenient"))
    trend = pass_trend(points)
    if trend is None:
        return found
    reward_rise = change(reward)
    if reward_rise >= RISE and trend.flat:
        found.append(_diagnosis("reward_gamed"))
    if abs(reward_rise) < FLAT and trend.rising:
        found.append(_diagnosis("reward_misses_progress"))
    if reward_rise > -FLAT and trend.falling:
        found.append(_diagnosis("pass_at_k_falling"))
    pairs = aligned(reward, points)
    at_points = [p[0] for p in pairs]
    both = set(reversals(at_points)) & set(trend.turns)
    together = [i for i in both if (at_points[i] - at_points[i - 1]) * (pairs[i][1] - pairs[i - 1][1]) > 0]
    if len(together) >= SWINGS_MIN:
        found.append(_diagnosis("unstable"))
    return found
