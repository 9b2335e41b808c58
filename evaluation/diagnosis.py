"""Reward vs capability: read a training reward curve beside eval pass@k per checkpoint, and
name what the shape means (docs/training.md "Evaluating policies and checkpoints"). Plain Python.

| symptom                                  | likely cause                                      |
|------------------------------------------|---------------------------------------------------|
| reward rises, pass@k does not move        | the policy learned the reward's surface: gamed    |
| reward flat, pass@k rises                 | still exploring; the reward misses real progress  |
| reward and pass@k swing together          | unstable environment or very uneven difficulty    |
| every reward reaches ~1 quickly           | leaked tests or a too-lenient reward              |

A series is a list of (step, value) pairs. Thresholds are absolute changes: rewards live in
[-1, 1] and pass@k in [0, 1], so a 0.2 rise is large in either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from evaluation.metrics import pearson, spearman

Series = list[tuple[float, float]]
Code = Literal["reward_gamed", "reward_misses_progress", "unstable", "leak_or_lenient"]

RISE = 0.2  # a change at least this large over the run counts as "rising"
FLAT = 0.05  # a change below this counts as "does not move"
SWING = 0.1  # a reversal at least this large counts as a swing
SWINGS_MIN = 2  # reversals in both series for "swinging"
NEAR_ONE = 0.95
EARLY = 0.25  # "quickly": within the first quarter of the run's steps
PASS_RISE = 0.1


@dataclass(frozen=True)
class Diagnosis:
    code: Code
    symptom: str
    cause: str
    action: str
    evidence: str  # which evidence to look at: cheat_flags | flaky_tasks | leak_report | trajectories


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


def reversals(values: list[float]) -> list[int]:
    """Indices where the direction changes by at least SWING on both sides."""
    diffs = [b - a for a, b in zip(values, values[1:], strict=False)]
    return [
        i + 1
        for i in range(len(diffs) - 1)
        if diffs[i] * diffs[i + 1] < 0 and abs(diffs[i]) >= SWING and abs(diffs[i + 1]) >= SWING
    ]


def aligned(reward: Series, points: Series) -> list[tuple[float, float]]:
    """(reward, pass@k) pairs: each eval point beside the last training reward logged at or before its step."""
    ordered = sorted(reward)
    out = []
    for step, value in sorted(points):
        before = [r for s, r in ordered if s <= step]
        if before:
            out.append((before[-1], value))
        elif ordered:
            out.append((ordered[0][1], value))
    return out


def correlations(reward: Series, points: Series) -> dict[str, float | None]:
    pairs = aligned(reward, points)
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    return {"pearson": pearson(xs, ys), "spearman": spearman(xs, ys), "points": len(pairs)}


def diagnose(reward: Series, pass_at_k: Series) -> list[Diagnosis]:
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
    if len(points) >= 2:
        pairs = aligned(reward, points)
        reward_rise = change(reward)
        pass_rise = change(points)
        if reward_rise >= RISE and abs(pass_rise) < FLAT:
            found.append(_diagnosis("reward_gamed"))
        if abs(reward_rise) < FLAT and pass_rise >= PASS_RISE:
            found.append(_diagnosis("reward_misses_progress"))
        at_points = [p[0] for p in pairs]
        both = set(reversals(at_points)) & set(reversals([p[1] for p in pairs]))
        together = [i for i in both if (at_points[i] - at_points[i - 1]) * (pairs[i][1] - pairs[i - 1][1]) > 0]
        if len(together) >= SWINGS_MIN:
            found.append(_diagnosis("unstable"))
    return found
