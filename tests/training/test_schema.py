"""One schema for the rl numbers: the Django checker and the trainer agree on every value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.runs import MODEL
from training.config import ConfigError, check
from training.schema import RL_SETTINGS, check_rl, doc_rows
from training.trainers.common import TrainerConfig, TrainerError, read_config

ROOT = Path(__file__).resolve().parents[2]

CASES = [
    ("sft", {"learning_rate": "fast"}),
    ("sft", {"learning_rate": 0}),
    ("sft", {"learning_rate": 1}),
    ("sft", {"max_length": 8}),
    ("sft", {"batch_size": 0}),
    ("sft", {"max_steps": True}),
    ("sft", {"kl_coef": -0.1}),
    ("sft", {"seed": 1.5}),
    ("sft", {"num_generations": 2}),
    ("grpo", {"num_generations": 1}),
    ("grpo", {"batch_size": 3, "num_generations": 2}),
    ("grpo", {"temperature": 0}),
    ("grpo", {"max_new_tokens": "many"}),
    ("grpo", {"loss_type": "ppo"}),
    ("grpo", {"mask_truncated_completions": "yes"}),
    ("grpo", {"epsilon": 0}),
    ("grpo", {"max_prompt_length": 4}),
    ("sft", {"reward_clip": 1}),
]
GOOD = [
    ("sft", {}),
    ("grpo", {"batch_size": 4, "num_generations": 4, "learning_rate": "1e-6", "temperature": 0.7}),
    ("grpo", {"loss_type": "dr_grpo", "mask_truncated_completions": True, "epsilon": 0.1, "reward_clip": 0.5}),
]


def _django(kind: str, rl: dict[str, object], train_file: Path) -> dict[str, str] | dict[str, object]:
    raw = {"kind": kind, "model": {"base_model": MODEL}, "rl": rl, "data": {"train_file": str(train_file)}}
    try:
        return check(raw).config["rl"]
    except ConfigError as exc:
        return {key: message for key, message in exc.errors.items() if key.startswith("rl.")}


def _trainer(kind: str, rl: dict[str, object], train_file: Path, run_dir: Path) -> str | TrainerConfig:
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"kind": kind, "model": {"base_model": MODEL}, "rl": rl, "data": {"train_file": str(train_file)}}
    (run_dir / "config.json").write_text(json.dumps(config))
    try:
        return read_config(run_dir)
    except TrainerError as exc:
        return str(exc)


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "rl"), CASES)
def test_a_value_one_side_refuses_the_other_refuses_with_the_same_words(
    kind: str, rl: dict[str, object], tmp_path: Path
) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text("{}\n")
    django = _django(kind, rl, data)
    trainer = _trainer(kind, rl, data, tmp_path / "run")
    assert isinstance(trainer, str), f"the trainer took {rl} that the page refuses: {django}"
    ((key, message),) = django.items()
    assert f"config.{key} {message}" in trainer


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "rl"), GOOD)
def test_what_the_page_accepts_the_trainer_reads_as_the_same_numbers(
    kind: str, rl: dict[str, object], tmp_path: Path
) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text("{}\n")
    normalised = _django(kind, rl, data)
    assert "rl.learning_rate" not in normalised
    # The trainer reads the config the launcher writes: the normalised one.
    trainer = _trainer(kind, dict(normalised), data, tmp_path / "run")
    assert isinstance(trainer, TrainerConfig), trainer
    for setting in RL_SETTINGS:
        if setting.key in normalised:
            assert getattr(trainer, setting.key) == normalised[setting.key], setting.key


def test_defaults_come_from_the_schema_on_both_sides() -> None:
    filled, errors = check_rl({}, None)
    assert not errors
    for setting in RL_SETTINGS:
        if setting.defaulted is None and not setting.kinds:
            assert filled[setting.key] == setting.default
        default = TrainerConfig.__dataclass_fields__[setting.key].default
        assert default == setting.default, setting.key


def test_docs_table_says_what_the_schema_says() -> None:
    guide = (ROOT / "docs" / "training.md").read_text()
    missing = [row for row in doc_rows() if row not in guide]
    assert not missing, "docs/training.md's rl table differs from training/schema.py:\n" + "\n".join(missing)
