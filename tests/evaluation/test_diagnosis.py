"""Each row of the reward-vs-pass@k diagnosis table is triggered by a synthetic series, and only
beyond the noise of the evaluations' own intervals."""

from __future__ import annotations

import pytest

from evaluation.diagnosis import Point, correlations, diagnose, pass_trend
from evaluation.metrics import wilson_ci

STEPS = [float(s) for s in range(0, 101, 10)]


def sure(step: float, value: float, half: float = 0.02) -> Point:
    """pass@k measured on a large suite: a narrow interval."""
    return Point(step, value, max(0.0, value - half), min(1.0, value + half))


def on_tasks(step: float, solved: int, tasks: int) -> Point:
    """pass@1 of `solved` out of `tasks` tasks, with the Wilson interval the evaluation computes."""
    return Point(step, solved / tasks, *wilson_ci(solved, tasks))


def codes(reward: list[float], points: list[Point]) -> set[str]:
    return {d.code for d in diagnose(list(zip(STEPS, reward, strict=True)), points)}


RISING_REWARD = [0.08 * i for i in range(11)]  # 0 -> 0.8
FLAT_REWARD = [0.10, 0.12, 0.10, 0.11, 0.10, 0.12, 0.11, 0.10, 0.12, 0.11, 0.11]


def test_reward_up_while_pass_at_k_is_flat_reads_as_a_gamed_reward() -> None:
    flat = [sure(20, 0.30), sure(40, 0.31), sure(60, 0.30), sure(80, 0.29), sure(100, 0.30)]
    assert codes(RISING_REWARD, flat) == {"reward_gamed"}
    diagnosis = diagnose(list(zip(STEPS, RISING_REWARD, strict=True)), flat)[0]
    assert diagnosis.evidence == "cheat_flags" and "gamed" in diagnosis.cause


def test_a_noisy_small_suite_is_not_diagnosed_as_gamed() -> None:
    # Five tasks: 1 or 2 solved at each checkpoint. pass@k's fitted change is 0, which a fixed
    # threshold reads as "flat", but each interval is about 0.6 wide: a real rise would look the same.
    noisy = [on_tasks(20, 1, 5), on_tasks(40, 1, 5), on_tasks(60, 2, 5), on_tasks(80, 1, 5), on_tasks(100, 1, 5)]
    trend = pass_trend(noisy)
    assert trend is not None and trend.change == pytest.approx(0.0, abs=1e-12) and trend.noise > 0.3
    assert not trend.flat and not trend.rising and not trend.falling
    assert codes(RISING_REWARD, noisy) == set()


def test_pass_at_k_swinging_under_a_rising_reward_is_not_called_gaming() -> None:
    # Fitted change near 0, narrow intervals, but pass@k swings far beyond them: not "flat".
    swinging = [sure(s, 0.2 if int(s / 10) % 2 == 0 else 0.5) for s in STEPS]
    trend = pass_trend(swinging)
    assert trend is not None and abs(trend.change) < 0.05 and len(trend.turns) >= 2
    assert "reward_gamed" not in codes(RISING_REWARD, swinging)


def test_reward_flat_while_pass_at_k_rises_reads_as_a_reward_that_misses_progress() -> None:
    rising = [sure(20, 0.1), sure(40, 0.2), sure(60, 0.3), sure(80, 0.4), sure(100, 0.5)]
    assert codes(FLAT_REWARD, rising) == {"reward_misses_progress"}
    # The same rise on a five-task suite stays inside its noise: no claim of progress.
    small = [on_tasks(20, 1, 5), on_tasks(60, 1, 5), on_tasks(100, 2, 5)]
    assert codes(FLAT_REWARD, small) == set()


def test_reward_rising_or_holding_while_pass_at_k_falls_beyond_noise_reads_as_pass_at_k_falling() -> None:
    falling = [sure(20, 0.5), sure(40, 0.42), sure(60, 0.35), sure(80, 0.28), sure(100, 0.2)]
    assert codes(RISING_REWARD, falling) == {"pass_at_k_falling"}
    assert codes(FLAT_REWARD, falling) == {"pass_at_k_falling"}
    diagnosis = diagnose(list(zip(STEPS, FLAT_REWARD, strict=True)), falling)[0]
    assert diagnosis.evidence == "comparison" and "falls" in diagnosis.symptom
    # A falling reward explains a falling pass@k: not this row.
    assert "pass_at_k_falling" not in codes([0.8 - 0.08 * i for i in range(11)], falling)
    # The same fall on five tasks (3 solved, then 1) does not leave the noise.
    assert codes(RISING_REWARD, [on_tasks(20, 3, 5), on_tasks(100, 1, 5)]) == set()


def test_both_swinging_together_reads_as_an_unstable_environment() -> None:
    reward = [0.2, 0.6, 0.2, 0.6, 0.2, 0.6, 0.2, 0.6, 0.2, 0.6, 0.2]
    swinging = [sure(s, 0.1 if int(s / 10) % 2 == 0 else 0.4) for s in STEPS]
    assert codes(reward, swinging) == {"unstable"}
    # The same reward swings against a steady pass@k are not "together".
    assert "unstable" not in codes(reward, [sure(s, 0.1 + s / 1000) for s in STEPS])
    # Nor are pass@k "swings" that stay within each evaluation's interval.
    within_noise = [Point(p.step, p.value, max(0.0, p.value - 0.3), min(1.0, p.value + 0.3)) for p in swinging]
    assert "unstable" not in codes(reward, within_noise)


def test_rewards_near_one_quickly_read_as_leaked_tests_or_a_lenient_reward() -> None:
    reward = [0.2, 0.97, 0.99, 0.98, 1.0, 0.99, 1.0, 1.0, 0.99, 1.0, 1.0]
    rising = [sure(20, 0.2), sure(60, 0.3), sure(100, 0.4)]
    assert codes(reward, rising) == {"leak_or_lenient"}
    assert diagnose(list(zip(STEPS, reward, strict=True)), rising)[0].evidence == "leak_report"


def test_a_healthy_run_gets_no_diagnosis_and_strong_correlation() -> None:
    reward = [0.05 * i + 0.1 for i in range(11)]
    points = [sure(20, 0.15), sure(40, 0.25), sure(60, 0.3), sure(80, 0.42), sure(100, 0.5)]
    series = list(zip(STEPS, reward, strict=True))
    assert diagnose(series, points) == []
    corr = correlations(series, points)
    assert corr["points"] == 5 and corr["spearman"] == pytest.approx(1.0) and (corr["pearson"] or 0) > 0.98
    assert diagnose(series[:1], points) == []
    assert pass_trend(points[:1]) is None and diagnose(series, points[:1]) == []


def test_the_trends_noise_is_each_points_interval_carried_through_the_fit() -> None:
    # Two points: the change is their difference, its half-width the two half-widths in quadrature.
    trend = pass_trend([sure(0, 0.2, half=0.03), sure(50, 0.5, half=0.04)])
    assert trend is not None
    assert trend.change == pytest.approx(0.3) and trend.noise == pytest.approx(0.05)
