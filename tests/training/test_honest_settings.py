"""Honest defaults: max_length comes from the data, GRPO's settings reach TRL, every accepted key is used or refused."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from core.vocabulary import TrainingKind
from tests.training.runs import MODEL
from tests.training.trainer_support import BUNDLED, grpo_rows, parse_events, run_config, sft_rows, write_jsonl
from training.config import ConfigError, check
from training.schema import check_rl
from training.trainers import grpo
from training.trainers.common import TrainerError, load_tokenizer, read_config
from training.trainers.events import EventCallback
from training.trainers.lengths import RowLength, fit_max_length, measure, model_context

ROWS = [RowLength(tokens=900, needed=880), RowLength(tokens=1500, needed=1490), RowLength(tokens=400, needed=390)]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_tokenizer(BUNDLED)


def test_max_length_left_out_is_the_longest_row_bounded_by_the_models_context() -> None:
    filled, errors = check_rl({}, TrainingKind.SFT)
    assert not errors and "max_length" not in filled  # no 1024 filled in behind the user's back
    fit = fit_max_length(None, ROWS, context=8192, cuts=True)
    assert (fit.max_length, fit.longer) == (1500, 0)
    bounded = fit_max_length(None, ROWS, context=1000, cuts=True)
    assert (bounded.max_length, bounded.longer) == (1000, 1)  # the one row cut is counted


def test_a_max_length_that_would_cut_a_last_assistant_turn_is_refused_naming_the_value_needed() -> None:
    with pytest.raises(TrainerError) as refused:
        fit_max_length(1024, ROWS, context=8192, cuts=True)
    message = str(refused.value)
    assert "rl.max_length (1024) would cut the last assistant turn of 1 of 3 rows" in message
    assert "at least 1490" in message and "longest row (1500 tokens)" in message
    # A row whose last turn fits but whose tail does not is kept and counted as truncated.
    assert fit_max_length(1495, ROWS, context=8192, cuts=True).longer == 1
    # The reward trainer drops longer pairs whole (nothing is cut): a given value stands.
    assert fit_max_length(1024, ROWS, context=8192, cuts=False).longer == 1


def test_the_oracle_chats_are_measured_to_their_last_assistant_token(tokenizer: Any) -> None:
    row = sft_rows()[0]
    length = measure(tokenizer, row["messages"], json.dumps(row["tools"]))
    encoded = tokenizer.apply_chat_template(
        row["messages"], tools=row["tools"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    assert length.tokens == len(encoded["input_ids"]) > 1024  # the old default cut every one of these
    last = max(i for i, bit in enumerate(encoded["assistant_masks"]) if bit)
    assert length.needed == last + 1 < length.tokens  # the final tool observation follows the last call
    assert model_context(BUNDLED) == 8192


def test_grpo_settings_reach_trls_grpo_config_and_long_prompts_are_dropped_and_counted(
    tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transformers
    import trl

    seen: dict[str, Any] = {}

    class FakeTrainer:
        def __init__(self, **kwargs: Any) -> None:
            seen.update(kwargs)

        def remove_callback(self, callback: Any) -> None:
            pass

        def train(self) -> None:
            seen["trained"] = True

    monkeypatch.setattr(trl, "GRPOConfig", lambda **kwargs: SimpleNamespace(**kwargs))
    monkeypatch.setattr(trl, "GRPOTrainer", FakeTrainer)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: object())
    data = write_jsonl(tmp_path / "grpo.jsonl", grpo_rows(("task_0001", "task_0002")))
    rl = {"num_generations": 2, "epsilon": 0.1, "loss_type": "dr_grpo", "mask_truncated_completions": True}
    run_config(tmp_path / "run", "grpo", BUNDLED, data, rl)
    config = read_config(tmp_path / "run")
    assert config.max_new_tokens == 512  # not 64, which clipped every generation of a diff
    grpo.train(config)
    args = seen["args"]
    assert (args.epsilon, args.loss_type, args.mask_truncated_completions) == (0.1, "dr_grpo", True)
    assert args.max_completion_length == 512 and seen["trained"]
    assert len(seen["train_dataset"]) == 2

    prompts = grpo.grpo_rows(config, grpo.Scorer())
    sizes = sorted(
        len(
            tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=True, return_dict=True)[
                "input_ids"
            ]
        )
        for r in prompts
    )
    assert len(grpo.prompts_within(tokenizer, prompts, sizes[0])) == 1
    with pytest.raises(
        TrainerError, match=rf"every one of the 2 prompts is longer than rl.max_prompt_length \({sizes[0] - 1}\)"
    ):
        grpo.prompts_within(tokenizer, prompts, sizes[0] - 1)


def test_reward_clip_is_applied_to_the_rewards_grpo_compares() -> None:
    class Scorer:
        def score(self, task_dir: str, patch: str, termination: str) -> Any:
            return SimpleNamespace(reward=1.0, resolved=True, breakdown={}, flags=[])

    reward = grpo.reward_function(Scorer(), "single_turn", clip=0.5)  # type: ignore[arg-type]
    with redirect_stdout(io.StringIO()) as out:
        got = reward(prompts=["p"], completions=["no diff"], task_id=["t"], task_dir=["d"])
    assert got == [0.5]
    (rollout,) = parse_events(out.getvalue())
    assert rollout["reward"] == 1.0  # the stored rollout keeps the reward as scored


@pytest.mark.django_db
def test_keys_no_trainer_honours_are_refused_on_submit_and_by_the_trainer(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text("{}\n")
    base = {"model": {"base_model": MODEL}, "data": {"train_file": str(data)}}
    with pytest.raises(ConfigError) as caught:
        check({**base, "kind": "sft", "model": {"base_model": MODEL, "load_in_4bit": True}, "rl": {"reward_clip": 1}})
    assert "4-bit weights train only through adapters" in caught.value.errors["model.load_in_4bit"]
    assert caught.value.errors["rl.reward_clip"] == "applies to grpo runs only"
    with pytest.raises(ConfigError) as caught:
        check(
            {**base, "kind": "grpo", "rl": {"loss_type": "ppo", "mask_truncated_completions": "yes", "reward_clip": 0}}
        )
    assert "must be one of dapo, grpo" in caught.value.errors["rl.loss_type"]
    assert caught.value.errors["rl.mask_truncated_completions"] == "must be true or false"
    assert "must be a number c > 0" in caught.value.errors["rl.reward_clip"]
    assert check({**base, "kind": "grpo", "rl": {"reward_clip": 0.5}}).config["rl"]["reward_clip"] == 0.5

    written = run_config(tmp_path / "run", "sft", BUNDLED, data, {})
    written["model"]["load_in_4bit"] = True
    (tmp_path / "run" / "config.json").write_text(json.dumps(written))
    with pytest.raises(TrainerError, match="config.model.load_in_4bit must be false"):
        read_config(tmp_path / "run")


def test_clipped_generations_are_reported_by_name() -> None:
    callback = EventCallback("policy")
    state = SimpleNamespace(global_step=1, num_input_tokens_seen=0)
    with redirect_stdout(io.StringIO()) as out:
        callback.on_log(SimpleNamespace(world_size=1), state, None, logs={"completions/clipped_ratio": 1.0})  # type: ignore[arg-type]
    assert parse_events(out.getvalue())[0]["values"]["clipped_ratio"] == 1.0


@pytest.mark.parametrize("native", [False, True])
def test_bfloat16_mixed_precision_only_where_the_cpu_computes_it(
    native: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    import trl

    from training.trainers import common

    # TRL's configs turn bf16 on by default; an AVX2 CPU emulates it, several times slower than float32.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(common, "native_bfloat16", lambda: native)
    data = write_jsonl(tmp_path / "sft.jsonl", sft_rows())
    run_config(tmp_path / "run", "sft", BUNDLED, data, {})
    arguments = common.training_arguments(read_config(tmp_path / "run"))
    assert trl.SFTConfig(**arguments).bf16 is native
