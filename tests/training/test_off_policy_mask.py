"""Stale fleet samples meet an off-policy correction: TRL's off-policy sequence mask, on by default
where episodes may be sampled by weights older than the ones that learn from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.vocabulary import TrainingKind
from tests.training.trainer_support import BUNDLED, grpo_rows, run_config, write_jsonl
from training.schema import STALE_FLEET_MASK, check_rl
from training.trainers import grpo
from training.trainers.common import TrainerError, read_config


def _config(tmp_path: Path, name: str, rl: dict[str, Any], environment: dict[str, Any]) -> Any:
    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows())
    run_config(tmp_path / name, "grpo", BUNDLED, data, {"num_generations": 2, **rl}, environment=environment)
    return read_config(tmp_path / name)


def test_stale_fleet_episodes_are_masked_by_default_and_fresh_ones_are_not(tmp_path: Path) -> None:
    fleet = {"mode": "agent", "episodes": "fleet"}
    stale = _config(tmp_path, "stale", {"max_staleness": 1}, fleet)
    assert grpo.off_policy_threshold(stale) == STALE_FLEET_MASK
    fresh = _config(tmp_path, "fresh", {"max_staleness": 0}, fleet)
    assert grpo.off_policy_threshold(fresh) is None
    in_trainer = _config(tmp_path, "trainer", {}, {"mode": "agent"})
    assert grpo.off_policy_threshold(in_trainer) is None
    chosen = _config(tmp_path, "chosen", {"max_staleness": 2, "off_policy_mask": 0.1}, fleet)
    assert grpo.off_policy_threshold(chosen) == 0.1
    single = _config(tmp_path, "single", {"off_policy_mask": 0.3}, {"mode": "single_turn"})
    assert grpo.off_policy_threshold(single) == 0.3


def test_trl_takes_the_mask_threshold() -> None:
    from trl import GRPOConfig

    args = GRPOConfig(output_dir="/tmp/unused", use_cpu=True, off_policy_mask_threshold=STALE_FLEET_MASK)
    assert args.off_policy_mask_threshold == STALE_FLEET_MASK


def test_a_mask_that_is_not_a_positive_number_is_refused_on_both_sides(tmp_path: Path) -> None:
    for bad in (0, -1, "half"):
        _, errors = check_rl({"off_policy_mask": bad}, TrainingKind.GRPO)
        assert errors["rl.off_policy_mask"] == "must be a number > 0, e.g. 0.5"
        with pytest.raises(TrainerError, match="rl.off_policy_mask must be a number > 0"):
            _config(tmp_path, f"bad{bad}", {"off_policy_mask": bad}, {"mode": "single_turn"})
    _, errors = check_rl({"off_policy_mask": 0.5}, TrainingKind.SFT)
    assert errors["rl.off_policy_mask"] == "applies to grpo runs only"
