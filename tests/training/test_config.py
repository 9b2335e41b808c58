"""An rl_config is checked field by field on submit, in YAML or JSON, before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.training.runs import MODEL, config, scored, verified_set
from training.config import ConfigError, check, parse
from training.curation import CurationRule, build_training_set
from training.models import Checkpoint, TrainingSet

pytestmark = pytest.mark.django_db


def errors_of(raw: dict[str, object]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        check(raw)
    return caught.value.errors


def test_the_guides_yaml_and_the_same_json_both_check() -> None:
    verified_set()
    text = f"""
kind: sft
model:
  base_model: {MODEL}
  load_in_4bit: false
environment:
  sandbox_type: bwrap
  max_steps: 30
  timeout_seconds: 120
rl:
  trajectory_dir: ./trajectories
  batch_size: 8
  gradient_accumulation_steps: 4
  learning_rate: 1e-6
  kl_coef: 0.05
data:
  training_set: oracle
logging:
  log_file: ./logs/train.log
  save_every_steps: 50
"""
    from_yaml = check(parse(text))
    from_json = check(parse(json.dumps(yaml.safe_load(text))))
    assert from_yaml.config == from_json.config
    assert from_yaml.config["rl"]["learning_rate"] == pytest.approx(1e-6)  # YAML reads 1e-6 as text
    assert from_yaml.training_set is not None and from_yaml.training_set.version == 1
    assert from_yaml.base_model_dir == Path(MODEL).resolve()


def test_every_bad_field_gets_its_own_message() -> None:
    errors = errors_of(
        {
            "kind": "ppo",
            "model": {"base_model": "/nowhere/model"},
            "rl": {"max_steps": 0, "learning_rate": -1, "batch_size": "many", "kl_coef": -0.1},
            "data": {},
            "logging": {"save_every_steps": 0},
            "colour": "blue",
        }
    )
    assert "unknown kind 'ppo'" in errors["kind"]
    assert "unknown model" in errors["model.base_model"]
    assert "positive" in errors["rl.max_steps"] and "positive" in errors["rl.batch_size"]
    assert "between 0 and 1" in errors["rl.learning_rate"]
    assert "at least 0" in errors["rl.kl_coef"]
    assert "missing data set" in errors["data.training_set"]
    assert "positive" in errors["logging.save_every_steps"]
    assert "unknown key" in errors["colour"]
    assert "kind" in errors_of({"model": {"base_model": MODEL}})


def test_grpo_batches_hold_whole_groups_of_generations() -> None:
    verified_set()
    errors = errors_of(config("grpo", rl={"batch_size": 3, "num_generations": 2}))
    assert errors == {"rl.batch_size": errors["rl.batch_size"]}
    assert "(3) must be a multiple of rl.num_generations (2)" in errors["rl.batch_size"]
    assert "at least 2" in errors_of(config("grpo", rl={"num_generations": 1}))["rl.num_generations"]
    assert "grpo runs only" in errors_of(config("sft", rl={"num_generations": 2}))["rl.num_generations"]
    ok = check(config("grpo", rl={"batch_size": 4, "num_generations": 2}, environment={"mode": "agent"}))
    assert ok.config["environment"]["mode"] == "agent"
    assert "single_turn" in errors_of(config("grpo", environment={"mode": "chat"}))["environment.mode"]


def test_only_a_verified_non_empty_training_set_trains() -> None:
    assert "no training set 'oracle'" in errors_of(config())["data.training_set"]
    unverified = TrainingSet.objects.create(name="claimed", version=1, rule={}, trajectory_ids=["x"], stats={})
    assert "not verified" in errors_of(config(data={"training_set": "claimed"}))["data.training_set"]
    assert "not verified" in errors_of(config(data={"training_set": str(unverified)}))["data.training_set"]
    scored("task_c", True)
    build_training_set("oracle", CurationRule())
    build_training_set("oracle", CurationRule())
    assert check(config(data={"training_set": "oracle"})).training_set.version == 2  # type: ignore[union-attr]
    assert check(config(data={"training_set": "oracle@1"})).training_set.version == 1  # type: ignore[union-attr]
    assert "no training set" in errors_of(config(data={"training_set": "oracle@9"}))["data.training_set"]
    both = errors_of(config(data={"training_set": "oracle", "train_file": "x.jsonl"}))
    assert "not both" in both["data"]


def test_a_train_file_must_exist_and_a_checkpoint_can_be_the_base(tmp_path: Path) -> None:
    assert (
        "no such file" in errors_of(config(data={"training_set": None, "train_file": "nope.jsonl"}))["data.train_file"]
    )
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text("{}\n")
    checkpoint = Checkpoint.objects.create(name="c", path=MODEL, kind="policy")
    run = check(
        config(
            "dpo",
            model={"base_model": f"checkpoint:{checkpoint.pk}"},
            data={"training_set": None, "train_file": str(prefs)},
        )
    )
    assert run.base_checkpoint == checkpoint and run.train_file == prefs
    assert run.config["model"]["checkpoint"] == checkpoint.pk
    reward = Checkpoint.objects.create(name="rm", path=MODEL, kind="reward")
    errors = errors_of(
        config(
            "sft",
            model={"base_model": f"checkpoint:{reward.pk}"},
            data={"training_set": None, "train_file": str(prefs)},
        )
    )
    assert "is a reward model" in errors["model.base_model"]
    assert "no registered checkpoint" in errors_of(config(model={"base_model": "checkpoint:999"}))["model.base_model"]


def test_text_that_is_not_a_config_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="not valid YAML or JSON at line 2"):
        parse("kind: sft\n  : : [\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        parse("- just\n- a list\n")
    with pytest.raises(ConfigError, match="larger than"):
        parse("x" * 70_000)


def test_the_launch_forms_examples_are_valid_but_for_the_data_they_name() -> None:
    from training.examples import examples

    for kind, text in examples().items():
        errors = errors_of(parse(text))
        assert list(errors) in (["data.training_set"], ["data.train_file"]), (kind, errors)
