"""model.lora: adapters train instead of every weight, and an adapter checkpoint acts as the hf policy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.training.runs import MODEL
from tests.training.trainer_support import (
    chat_of,
    demo_trajectories,
    grpo_rows,
    make_tiny_model,
    of,
    preference_rows,
    run_config,
    sft_rows,
    train_in_process,
    train_in_subprocess,
    write_jsonl,
)
from training.config import ConfigError, check
from training.schema import check_lora, lora_doc_rows
from training.trainers.common import TrainerError, read_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def _with_lora(run_dir: Path, lora: Any) -> None:
    config = json.loads((run_dir / "config.json").read_text())
    config["model"]["lora"] = lora
    (run_dir / "config.json").write_text(json.dumps(config))


def test_a_lora_sft_run_saves_an_adapter_that_acts_as_the_hf_policy(tiny: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from trajectories.policies.base import Message, PolicyError
    from trajectories.policies.hf import HFPolicy, model_path_error
    from trajectories.tools import TOOLS

    rows = [{"messages": chat_of(t, 1), "tools": TOOLS} for t in demo_trajectories() if t.get("success")][:1]
    data = write_jsonl(tmp_path / "sft.jsonl", rows)
    run_config(tmp_path / "run", "sft", tiny, data, {"max_steps": 1, "batch_size": 1})
    _with_lora(tmp_path / "run", {"r": 4, "alpha": 8, "dropout": 0, "target_modules": ["q_proj", "v_proj"]})
    events = train_in_subprocess(tmp_path / "run")
    assert events[-1] == {"event": "done", "status": "succeeded"}
    (checkpoint,) = of(events, "checkpoint")
    assert checkpoint["kind"] == "policy"
    path = Path(checkpoint["path"])
    saved = {p.name for p in path.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer_config.json"} <= saved, saved
    assert "model.safetensors" not in saved, "an adapter checkpoint must not hold the full weights"
    adapter = json.loads((path / "adapter_config.json").read_text())
    assert Path(adapter["base_model_name_or_path"]).resolve() == tiny.resolve()
    assert adapter["r"] == 4 and sorted(adapter["target_modules"]) == ["q_proj", "v_proj"]
    weights = load_file(str(path / "adapter_model.safetensors"))
    assert weights and all("lora_" in key for key in weights)
    assert any("q_proj" in key for key in weights) and not any("mlp" in key for key in weights)
    assert any(key.endswith("lora_B.weight") and weights[key].abs().sum() > 0 for key in weights), (
        "a step at lr 1e-3 must move the adapters off their zero start"
    )

    assert model_path_error(str(path)) is None
    policy = HFPolicy(str(path), temperature=0.0, max_new_tokens=8)
    output = policy.act([Message("system", "fix it"), Message("user", "parse_config('') crashes")], TOOLS)
    assert output.usage["completion_tokens"] > 0

    # The adapter alone cannot act: a copy whose base is gone is refused, saying where the base was expected.
    moved = shutil.copytree(path, tmp_path / "moved")
    adapter["base_model_name_or_path"] = str(tmp_path / "gone")
    (moved / "adapter_config.json").write_text(json.dumps(adapter))
    assert "needs its base model" in str(model_path_error(str(moved)))
    with pytest.raises(PolicyError, match="needs its base model at .*gone"):
        HFPolicy(str(moved), temperature=0.0, max_new_tokens=8)


def test_a_target_module_the_model_lacks_fails_the_run_with_one_clear_line(tiny: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "sft.jsonl", sft_rows()[:1])
    run_config(tmp_path / "run", "sft", tiny, data, {"max_steps": 1, "batch_size": 1})
    _with_lora(tmp_path / "run", {"target_modules": ["q_proj", "c_attn"]})
    code, events = train_in_process(tmp_path / "run")
    assert code == 2
    error = events[-1]["error"]
    assert "config.model.lora.target_modules: c_attn is not a module of the model" in error
    assert "q_proj" in error.split("its modules end in:")[1]
    assert not of(events, "checkpoint")


@pytest.mark.parametrize(
    ("lora", "key", "message"),
    [
        ({"r": 0}, "r", "must be a whole number from 1 to 4096"),
        ({"r": 2.5}, "r", "must be a whole number from 1 to 4096"),
        ({"r": True}, "r", "must be a whole number from 1 to 4096"),
        ({"alpha": 0}, "alpha", "must be a whole number from 1 to 65536"),
        ({"alpha": 1.5}, "alpha", "must be a whole number from 1 to 65536"),
        ({"alpha": "big"}, "alpha", "must be a whole number from 1 to 65536"),
        ({"dropout": 1}, "dropout", "must be a number between 0 and 1"),
        ({"dropout": -0.1}, "dropout", "must be a number between 0 and 1"),
        ({"target_modules": []}, "target_modules", "must be all-linear or a list of module names"),
        ({"target_modules": [1]}, "target_modules", "must be all-linear or a list of module names"),
        ({"rank": 8}, "rank", "unknown key (known: alpha, dropout, r, target_modules)"),
    ],
)
def test_a_bad_lora_setting_is_refused_by_name(lora: dict[str, Any], key: str, message: str) -> None:
    _, errors = check_lora(lora)
    assert message in errors[f"model.lora.{key}"], errors


def test_lora_defaults_fill_in_and_a_single_name_is_a_list() -> None:
    assert check_lora({}) == ({"r": 16, "alpha": 32, "dropout": 0.05, "target_modules": "all-linear"}, {})
    assert check_lora({"target_modules": "q_proj", "r": "8"})[0]["target_modules"] == ["q_proj"]
    assert check_lora("yes")[1] == {"model.lora": "must be a mapping of r, alpha, dropout and target_modules"}


@pytest.mark.django_db
def test_the_page_refuses_what_the_trainer_refuses_with_the_same_words(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text("{}\n")
    raw = {"kind": "dpo", "model": {"base_model": MODEL, "lora": {"dropout": 2}}, "data": {"train_file": str(data)}}
    with pytest.raises(ConfigError) as caught:
        check(raw)
    message = caught.value.errors["model.lora.dropout"]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps(raw))
    with pytest.raises(TrainerError) as refused:
        read_config(tmp_path / "run")
    assert f"config.model.lora.dropout {message}, not 2" in str(refused.value)


@pytest.mark.django_db
def test_the_page_names_a_target_module_the_base_model_lacks(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text("{}\n")
    raw = {"kind": "sft", "model": {"base_model": MODEL}, "data": {"train_file": str(data)}}
    with pytest.raises(ConfigError) as caught:
        check({**raw, "model": {"base_model": MODEL, "lora": {"target_modules": ["qkv_proj"]}}})
    assert caught.value.errors == {
        "model.lora.target_modules": caught.value.errors["model.lora.target_modules"],
    }
    assert caught.value.errors["model.lora.target_modules"].startswith("qkv_proj is not a module of the model")
    accepted = check({**raw, "model": {"base_model": MODEL, "lora": {"r": 8, "target_modules": ["q_proj"]}}})
    assert accepted.config["model"]["lora"] == {"r": 8, "alpha": 32, "dropout": 0.05, "target_modules": ["q_proj"]}
    assert read_config_of(accepted.config, tmp_path).lora == accepted.config["model"]["lora"]


def read_config_of(config: dict[str, Any], tmp_path: Path) -> Any:
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    return read_config(tmp_path / "run")


def test_docs_table_of_lora_says_what_the_schema_says() -> None:
    guide = (ROOT / "docs" / "training.md").read_text()
    missing = [row for row in lora_doc_rows() if row not in guide]
    assert not missing, "docs/training.md's model.lora table differs from training/schema.py:\n" + "\n".join(missing)


@pytest.mark.parametrize(("kind", "head"), [("dpo", None), ("reward", "score")])
def test_dpo_and_reward_runs_train_adapters_only(tiny: Path, tmp_path: Path, kind: str, head: str | None) -> None:
    from safetensors.torch import load_file

    data = write_jsonl(tmp_path / "pairs.jsonl", preference_rows())
    # Left out, max_length is the longest pair: the reward trainer would drop the longer ones.
    run_config(tmp_path / "run", kind, tiny, data, {"max_length": 600} if kind == "dpo" else {"batch_size": 1})
    _with_lora(tmp_path / "run", {"r": 2, "target_modules": ["v_proj"]})
    code, events = train_in_process(tmp_path / "run")
    assert code == 0, events[-1]
    (checkpoint,) = of(events, "checkpoint")
    path = Path(checkpoint["path"])
    assert (path / "adapter_config.json").is_file() and not (path / "model.safetensors").exists()
    keys = set(load_file(str(path / "adapter_model.safetensors")))
    assert any("v_proj.lora_A" in key for key in keys)
    # A reward model's score head is new: it trains in full and is saved with the adapters.
    assert any(f"{head}." in key for key in keys) if head else not any("score" in key for key in keys)


def test_a_grpo_run_trains_adapters_with_the_verified_reward(tiny: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows())
    run_config(
        tmp_path / "run",
        "grpo",
        tiny,
        data,
        {"num_generations": 2, "max_new_tokens": 8, "kl_coef": 0.05},
        environment={"mode": "single_turn"},
    )
    _with_lora(tmp_path / "run", {"r": 2})
    code, events = train_in_process(tmp_path / "run")
    assert code == 0, events[-1]
    assert len(of(events, "rollout")) == 2
    (checkpoint,) = of(events, "checkpoint")
    adapter = json.loads((Path(checkpoint["path"]) / "adapter_config.json").read_text())
    assert adapter["r"] == 2 and adapter["target_modules"]


@pytest.mark.django_db
def test_load_in_4bit_is_taken_with_lora_and_refused_by_a_trainer_without_cuda_and_bitsandbytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from training.trainers import common

    data = tmp_path / "rows.jsonl"
    data.write_text("{}\n")
    raw = {"kind": "sft", "model": {"base_model": MODEL, "load_in_4bit": True}, "data": {"train_file": str(data)}}
    with pytest.raises(ConfigError) as caught:
        check(raw)
    assert caught.value.errors["model.load_in_4bit"].startswith("must be false unless model.lora is set")
    with pytest.raises(ConfigError) as caught:
        check({**raw, "model": {"base_model": MODEL, "load_in_4bit": "yes", "lora": {}}})
    assert caught.value.errors == {"model.load_in_4bit": "must be true or false"}
    accepted = check({**raw, "model": {"base_model": MODEL, "load_in_4bit": True, "lora": {"r": 8}}}).config
    assert accepted["model"]["load_in_4bit"] is True

    monkeypatch.setattr(common, "four_bit_available", lambda: False)
    with pytest.raises(TrainerError, match="config.model.load_in_4bit needs CUDA and the bitsandbytes package"):
        read_config_of(accepted, tmp_path)
    monkeypatch.setattr(common, "four_bit_available", lambda: True)
    trainer = read_config_of(accepted, tmp_path)
    assert trainer.load_in_4bit and trainer.lora is not None
    # On a GPU host the base is read as NF4 onto the process's own GPU, computing in bfloat16.
    monkeypatch.setenv("LOCAL_RANK", "1")
    kwargs = common.quantized(trainer)
    config = kwargs["quantization_config"]
    assert (
        config.load_in_4bit
        and config.bnb_4bit_quant_type == "nf4"
        and str(config.bnb_4bit_compute_dtype) == ("torch.bfloat16")
    )
    assert kwargs["device_map"] == {"": 1}
    assert (
        common.quantized(read_config_of({**accepted, "model": {**accepted["model"], "load_in_4bit": False}}, tmp_path))
        == {}
    )
