"""People vs each reward-model checkpoint, in the comparison set's agreement report."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from annotation.agreement import preference_of
from annotation.agreement_report import agreement_report
from core.vocabulary import CheckpointKind
from tests.annotation.agreement_fixtures import Pair, make_set
from tests.training.trainer_support import make_tiny_model, make_tiny_reward_model
from training import reward_scorers
from training.models import Checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def tiny_reward_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = make_tiny_model(tmp_path_factory.mktemp("tiny-lm"))
    return make_tiny_reward_model(base, tmp_path_factory.mktemp("tiny-rm"))


def test_each_reward_model_checkpoint_is_compared_with_people(tiny_reward_model: Path, tmp_path: Path) -> None:
    cset = make_set(
        "rm-vs-people",
        [Pair({"ann": "A", "bob": "A"}), Pair({"ann": "B", "bob": "B"}), Pair({"ann": "A", "bob": "A"})],
    )
    checkpoint = Checkpoint.objects.create(name="rm-1", kind=CheckpointKind.REWARD, path=str(tiny_reward_model))
    gone = tmp_path / "deleted-checkpoint"
    shutil.copytree(tiny_reward_model, gone)
    Checkpoint.objects.create(name="rm-gone", kind=CheckpointKind.REWARD, path=str(gone))
    shutil.rmtree(gone)
    Checkpoint.objects.create(name="policy", kind=CheckpointKind.POLICY, path=str(tiny_reward_model))

    report = agreement_report(cset)

    name = f"reward model rm-1 (#{checkpoint.pk})"
    assert set(report["scorers"]) == {"verified_reward", name}  # no policy, no missing files
    figures = report["scorers"][name]
    assert figures["pairs"] == figures["scored"] == 3
    # The figures are the model's own preferences, scored the way the report says.
    expected = 0
    for comparison, verdict in zip(cset.comparisons.order_by("position"), "ABA", strict=True):
        difference = reward_scorers.score_difference(checkpoint.pk, checkpoint.path, comparison)
        expected += preference_of(difference) == verdict
    assert figures["agreed"] == expected
    assert name in report["trend"]["points"][0]["scorers"]
