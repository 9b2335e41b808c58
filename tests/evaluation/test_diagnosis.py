"""Each row of the reward-vs-pass@k diagnosis table is triggered by a synthetic series."""

from __future__ import annotations

import pytest

from evaluation.diagnosis import correlations, diagnose

STEPS = [float(s) for s in range(0, 101, 10)]


def codes(reward: list[float], points: list[tuple[float, float]]) -> set[str]:
    return {d.code for d in diagnose(list(zip(STEPS, reward, strict=True)), points)}


def test_reward_up_while_pass_at_k_is_flat_reads_as_a_gamed_reward() -> None:
    reward = [0.08 * i for i in range(11)]  # 0 -> 0.8
    flat = [(20.0, 0.30), (40.0, 0.31), (60.0, 0.30), (80.0, 0.29), (100.0, 0.30)]
    assert codes(reward, flat) == {"reward_gamed"}
    diagnosis = diagnose(list(zip(STEPS, reward, strict=True)), flat)[0]
    assert diagnosis.evidence == "cheat_flags" and "gamed" in diagnosis.cause


def test_reward_flat_while_pass_at_k_rises_reads_as_a_reward_that_misses_progress() -> None:
    reward = [0.10, 0.12, 0.10, 0.11, 0.10, 0.12, 0.11, 0.10, 0.12, 0.11, 0.11]
    rising = [(20.0, 0.1), (40.0, 0.2), (60.0, 0.3), (80.0, 0.4), (100.0, 0.5)]
    assert codes(reward, rising) == {"reward_misses_progress"}


def test_both_swinging_together_reads_as_an_unstable_environment() -> None:
    reward = [0.2, 0.6, 0.2, 0.6, 0.2, 0.6, 0.2, 0.6, 0.2, 0.6, 0.2]
    swinging = [(s, 0.1 if int(s / 10) % 2 == 0 else 0.4) for s in STEPS]
    assert codes(reward, swinging) == {"unstable"}
    # The same reward swings against a steady pass@k are not "together".
    assert "unstable" not in codes(reward, [(s, 0.1 + s / 1000) for s in STEPS])


def test_rewards_near_one_quickly_read_as_leaked_tests_or_a_lenient_reward() -> None:
    reward = [0.2, 0.97, 0.99, 0.98, 1.0, 0.99, 1.0, 1.0, 0.99, 1.0, 1.0]
    rising = [(20.0, 0.2), (60.0, 0.3), (100.0, 0.4)]
    assert codes(reward, rising) == {"leak_or_lenient"}
    assert diagnose(list(zip(STEPS, reward, strict=True)), rising)[0].evidence == "leak_report"


def test_a_healthy_run_gets_no_diagnosis_and_strong_correlation() -> None:
    reward = [0.05 * i + 0.1 for i in range(11)]
    points = [(20.0, 0.15), (40.0, 0.25), (60.0, 0.3), (80.0, 0.42), (100.0, 0.5)]
    series = list(zip(STEPS, reward, strict=True))
    assert diagnose(series, points) == []
    corr = correlations(series, points)
    assert corr["points"] == 5 and corr["spearman"] == pytest.approx(1.0) and (corr["pearson"] or 0) > 0.98
    assert diagnose(series[:1], points) == []
