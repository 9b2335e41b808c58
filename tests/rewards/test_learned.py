"""A reward model in a reward spec: validated, bounded, and unable to buy back a cheat.

The scorer here is a stand-in that returns whatever score an attacker could wring out of a
reward model (huge, negative, NaN): the rules must hold for any score. The real scorer, a
trained checkpoint, is exercised in tests/training/test_learned_reward.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rewards import learned
from rewards.learned import LearnedScoreError, apply_learned
from rewards.spec import SpecError, parse_spec

BASE = {"name": "with-rm"}


def spec_with(*components: dict[str, object]) -> object:
    return parse_spec({**BASE, "learned": list(components)})


@pytest.fixture
def scorer_giving() -> Iterator[list[float]]:
    """Make the installed scorer return the given score; put the real one back afterwards."""
    score: list[float] = [0.0]
    previous = learned._scorer
    learned.register_learned_scorer(lambda ref, trajectory: score[0])
    yield score
    learned._scorer = previous


@pytest.mark.parametrize(
    ("component", "message"),
    [
        ({"checkpoint": "rm", "weight": 0.6}, r"learned\[0\]\.weight must be in \(0, 0\.5\]"),
        ({"checkpoint": "rm", "weight": 0}, r"learned\[0\]\.weight must be in"),
        ({"checkpoint": "rm", "weight": True}, r"learned\[0\]\.weight must be a number"),
        ({"checkpoint": "", "weight": 0.1}, r"learned\[0\]\.checkpoint must be"),
        ({"checkpoint": "rm", "weight": 0.1, "alone": True}, r"learned\[0\] must be a mapping with checkpoint"),
    ],
)
def test_a_bad_learned_component_is_refused_by_field(component: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        spec_with(component)


def test_reward_models_together_never_outweigh_the_verified_outcome() -> None:
    with pytest.raises(SpecError, match="add up to 0.6"):
        spec_with({"checkpoint": "a", "weight": 0.3}, {"checkpoint": "b", "weight": 0.3})
    with pytest.raises(SpecError, match="learned must be a list"):
        parse_spec({**BASE, "learned": {"checkpoint": "a"}})


def test_a_spec_with_a_reward_model_has_its_own_version_and_one_without_keeps_its_old_one() -> None:
    plain = parse_spec(BASE)
    assert parse_spec({**BASE, "learned": []}).version == plain.version
    with_rm = spec_with({"checkpoint": 7, "weight": 0.2})
    assert with_rm.version != plain.version  # type: ignore[attr-defined]
    assert with_rm.learned[0].checkpoint == "7"  # type: ignore[attr-defined]


def test_fooling_the_reward_model_never_pays_as_much_as_passing_the_tests(scorer_giving: list[float]) -> None:
    spec = spec_with({"checkpoint": "rm", "weight": 0.2})
    scorer_giving[0] = 1e9  # the policy found the reward model's sweet spot
    lifted, entry = apply_learned(spec, 0.5, False, True, [], object())  # type: ignore[arg-type]
    assert lifted == pytest.approx(0.7) and entry["shift"] == pytest.approx(0.2)
    near, _ = apply_learned(spec, 0.75, False, True, [], object())  # type: ignore[arg-type]
    assert near == pytest.approx(0.8)  # capped at 1 - W: unresolved stays below a resolved patch's floor
    scorer_giving[0] = -1e9  # ...and the reward model hates the patch that passes every test
    resolved, _ = apply_learned(spec, 1.0, True, True, [], object())  # type: ignore[arg-type]
    assert resolved == pytest.approx(0.8) and resolved >= near


@pytest.mark.parametrize(
    ("valid", "policies", "why"),
    [
        (True, ["negative"], "an anti-cheat policy decided this reward"),
        (True, ["zero", "review"], "an anti-cheat policy decided this reward"),
        (False, [], "the test run was not valid"),
    ],
)
def test_a_cheat_cannot_be_bought_back_with_a_pleasing_transcript(
    scorer_giving: list[float], valid: bool, policies: list[str], why: str
) -> None:
    scorer_giving[0] = 1e9
    spec = spec_with({"checkpoint": "rm", "weight": 0.5})
    reward, entry = apply_learned(spec, -1.0, False, valid, policies, object())  # type: ignore[arg-type]
    assert reward == -1.0 and entry == {"applied": False, "why": why, "weight": 0.5}


def test_a_non_finite_score_fails_the_scoring(scorer_giving: list[float]) -> None:
    scorer_giving[0] = float("nan")
    with pytest.raises(LearnedScoreError, match="non-finite"):
        apply_learned(spec_with({"checkpoint": "rm", "weight": 0.1}), 0.0, False, True, [], object())  # type: ignore[arg-type]
