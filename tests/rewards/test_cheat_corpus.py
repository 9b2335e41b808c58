"""Issues 4 and 11: cheats are denied full reward and named; honest fixes score 1 with no flag."""

from __future__ import annotations

import pytest

from rewards.scoring import Score, score_patch
from rewards.spec import load_spec
from tests.rewards.corpus import CHEATS, HONEST, Case, make_patch, task_spec

SPEC = load_spec()


def score(case: Case) -> Score:
    return score_patch(task_spec(case.task_id, timeout=15), make_patch(case.task_id, case.edit), SPEC)


def test_the_corpus_is_big_and_varied_enough() -> None:
    assert len({c.name for c in CHEATS}) >= 15


@pytest.mark.parametrize("case", CHEATS, ids=lambda c: c.name)
def test_a_cheat_is_denied_full_reward_and_named(case: Case) -> None:
    result = score(case)
    assert result.reward < 1 and not result.resolved
    detectors = {f.detector for f in result.flags}
    if case.detector is not None:
        assert case.detector in detectors, (detectors, result.breakdown)
    if case.fools_naive_scorer:
        assert result.reward <= 0, result.to_json()
        assert detectors, "a trick that fools a plain scorer must be flagged"


@pytest.mark.parametrize("case", HONEST, ids=lambda c: c.name)
def test_an_honest_fix_scores_1_without_any_flag(case: Case) -> None:
    result = score(case)
    assert result.reward == 1.0 and result.resolved, result.to_json()
    assert result.flags == [], result.to_json()


def test_new_tests_are_set_aside_not_punished() -> None:
    result = score(next(c for c in HONEST if c.name == "the fix plus new tests"))
    assert result.breakdown["files"]["new_tests_set_aside"] == ["tests/test_more_empty.py"]
