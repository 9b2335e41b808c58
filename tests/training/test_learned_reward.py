"""A reward-model checkpoint as a weighted component of the reward service's spec."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from django.test import Client
from pytest_django import Settings

from core.vocabulary import CheckpointKind
from rewards.models import Reward
from rewards.services import RewardError, score_trajectory
from tasks.models import TaskSuite
from tests.conftest import client_for
from tests.training.trainer_support import make_tiny_model, make_tiny_reward_model
from training import reward_scorers
from training.models import Checkpoint
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def tiny_reward_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = make_tiny_model(tmp_path_factory.mktemp("tiny-lm"))
    return make_tiny_reward_model(base, tmp_path_factory.mktemp("tiny-rm"))


def use_spec(settings: Settings, tmp_path: Path, learned: list[dict[str, object]]) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "verified-plus-rm", "learned": learned}))
    settings.CRUCIBLE_REWARD_SPEC = str(path)


def demo_trajectory(task_id: str, success: bool) -> Trajectory:
    found = Trajectory.objects.filter(task__task_id=task_id, claimed__success=success).exclude(patch="").first()
    assert found is not None
    return found


def test_the_reward_model_shifts_the_verified_reward_and_shows_in_the_breakdown(
    demo_suite: TaskSuite, tiny_reward_model: Path, settings: Settings, tmp_path: Path, admin_user: object
) -> None:
    checkpoint = Checkpoint.objects.create(name="rm-a", kind=CheckpointKind.REWARD, path=str(tiny_reward_model))
    use_spec(settings, tmp_path, [{"checkpoint": "rm-a", "weight": 0.2}])
    trajectory = demo_trajectory("task_0009", False)

    reward = score_trajectory(str(trajectory.trajectory_id))

    entry = reward.breakdown["learned"]
    raw = reward_scorers.trajectory_score(checkpoint.pk, checkpoint.path, trajectory)
    assert entry["applied"] is True and entry["components"][0]["raw"] == pytest.approx(raw, abs=1e-5)
    verified = entry["verified"]
    assert verified == reward.breakdown["outcome"] + reward.breakdown["early_termination"]
    expected = min(verified + 0.2 * math.tanh(raw), max(verified, 0.8))
    assert reward.reward == pytest.approx(expected, abs=1e-5) and reward.spec_version.startswith("verified-plus-rm@")
    page = client_for(admin_user).get(f"/trajectories/{trajectory.trajectory_id}/")  # type: ignore[arg-type]
    assert b"Reward models" in page.content and b"rm-a" in page.content


def test_a_spec_naming_a_missing_reward_model_fails_the_scoring_and_writes_nothing(
    demo_suite: TaskSuite, settings: Settings, tmp_path: Path
) -> None:
    Checkpoint.objects.create(name="policy-not-rm", kind=CheckpointKind.POLICY, path=str(tmp_path))
    use_spec(settings, tmp_path, [{"checkpoint": "policy-not-rm", "weight": 0.1}])
    trajectory = demo_trajectory("task_0001", True)
    with pytest.raises(RewardError, match="no reward-model checkpoint 'policy-not-rm'"):
        score_trajectory(str(trajectory.trajectory_id))
    assert not Reward.objects.filter(trajectory=trajectory).exists()


def test_a_broken_reward_spec_setting_is_a_clear_error(settings: Settings, tmp_path: Path, client: Client) -> None:
    use_spec(settings, tmp_path, [{"checkpoint": "rm", "weight": 0.9}])
    with pytest.raises(RewardError, match=r"CRUCIBLE_REWARD_SPEC: learned\[0\]\.weight"):
        score_trajectory("00000000-0000-0000-0000-000000000000")
