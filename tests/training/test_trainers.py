"""The trainer subprocess: SFT, reward model and DPO train for real and leave loadable checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.trainer_support import (
    chat_of,
    demo_trajectories,
    make_tiny_model,
    of,
    preference_rows,
    run_config,
    sft_rows,
    train_in_process,
    train_in_subprocess,
    write_jsonl,
)
from training.trainers.common import clean_checkpoint, load_tokenizer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def test_sft_runs_as_a_subprocess_and_its_checkpoint_serves_as_the_hf_policy(tiny: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trajectories.policies.base import Message
    from trajectories.policies.hf import HFPolicy
    from trajectories.tools import TOOLS

    # Each success's first tool call and its observation: every call ends within 1152 tokens (a value that
    # cut one would be refused), and the longer conversation loses only the end of its observation.
    rows = [{"messages": chat_of(t, 1), "tools": TOOLS} for t in demo_trajectories() if t.get("success")][:2]
    data = write_jsonl(tmp_path / "sft.jsonl", rows)
    run_config(tmp_path / "run", "sft", tiny, data, {"max_steps": 2, "batch_size": 1, "max_length": 1152})
    events = train_in_subprocess(tmp_path / "run")
    metrics = of(events, "metric")
    assert [m["step"] for m in metrics] == [1, 2]
    assert metrics[0]["values"]["dropped_for_length"] == 0 and metrics[0]["values"]["truncated_for_length"] == 1
    assert all(m["values"]["loss"] > 0 for m in metrics)
    assert {"grad_norm", "learning_rate", "tokens_per_s", "steps_per_min"} <= metrics[0]["values"].keys()
    # What the step cost the machine: the trainer's CPU (a step of work at least partly busy) and memory.
    system = metrics[-1]["values"]
    assert system["system_cpu_percent"] > 0 and 50 < system["system_rss_mb"] < 24 * 1024
    checkpoints = of(events, "checkpoint")
    assert [c["step"] for c in checkpoints] == [1, 2]
    assert checkpoints[-1]["kind"] == "policy" and checkpoints[-1]["metrics"]["loss"] == metrics[-1]["values"]["loss"]
    assert events[-1] == {"event": "done", "status": "succeeded"}
    # It learned: its loss on its own rows is lower after than before (the run page's "Learned").
    (learned,) = of(events, "learned")
    assert learned["rows"] == 2 and learned["loss_after"] < learned["loss_before"]
    assert not [m for m in metrics if any(key.startswith("eval_") for key in m["values"])]  # not a step

    path = Path(checkpoints[-1]["path"])
    trained = AutoModelForCausalLM.from_pretrained(path)
    base = AutoModelForCausalLM.from_pretrained(tiny)
    assert any(not (a == b).all() for a, b in zip(trained.parameters(), base.parameters(), strict=True)), (
        "two steps at lr 1e-3 must move the weights"
    )
    # The saved tokenizer keeps the tool-call dialect the policy is prompted in.
    assert "<tool_call>" in AutoTokenizer.from_pretrained(path).chat_template
    policy = HFPolicy(str(path), temperature=0.0, max_new_tokens=8)
    output = policy.act([Message("system", "fix it"), Message("user", "parse_config('') crashes")], TOOLS)
    assert output.usage["completion_tokens"] > 0


def test_sft_loss_covers_the_assistant_calls_and_masks_tool_observations(tiny: Path) -> None:
    row = sft_rows()[0]
    tokenizer = load_tokenizer(tiny)
    encoded = tokenizer.apply_chat_template(
        row["messages"], tools=row["tools"], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = encoded["input_ids"], encoded["assistant_masks"]
    trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    masked = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    observation = row["messages"][3]["content"]
    assert row["messages"][3]["role"] == "tool"
    assert '"name": "read_file"' in trained
    assert observation[:200] in masked and observation[:40] not in trained
    assert "# Tools" in masked  # the system prompt and tool schemas are context, not targets


def test_reward_model_trains_reports_pairs_dropped_for_length_and_scores(tiny: Path, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    data = write_jsonl(tmp_path / "pairs.jsonl", preference_rows(long_pair=True))
    run_config(tmp_path / "run", "reward", tiny, data, {"max_length": 4000})
    code, events = train_in_process(tmp_path / "run")
    assert code == 0
    metric = of(events, "metric")[0]["values"]
    assert metric["dropped_for_length"] == 1 and metric["pairs"] == 2
    assert "accuracy" in metric and "loss" in metric
    (checkpoint,) = of(events, "checkpoint")
    assert checkpoint["kind"] == "reward"
    (learned,) = of(events, "learned")
    assert learned["loss_after"] < learned["loss_before"]
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint["path"])
    assert model.config.num_labels == 1
    tokenizer = AutoTokenizer.from_pretrained(checkpoint["path"])
    with torch.no_grad():
        score = model(**tokenizer("diff --git a/x b/x", return_tensors="pt")).logits
    assert score.shape == (1, 1)


def test_reward_run_fails_clearly_when_every_pair_is_too_long(tiny: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "pairs.jsonl", preference_rows())
    run_config(tmp_path / "run", "reward", tiny, data, {"max_length": 64})
    code, events = train_in_process(tmp_path / "run")
    assert code == 2
    assert events[-1]["status"] == "failed" and "longer than rl.max_length (64)" in events[-1]["error"]
    assert not of(events, "checkpoint")


def test_dpo_trains_against_the_base_as_reference(tiny: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    data = write_jsonl(tmp_path / "pairs.jsonl", preference_rows())
    run_config(tmp_path / "run", "dpo", tiny, data, {"max_length": 600, "batch_size": 1, "kl_coef": 0.1})
    code, events = train_in_process(tmp_path / "run")
    assert code == 0
    values = of(events, "metric")[0]["values"]
    assert {"loss", "margin", "accuracy"} <= values.keys()
    # Before a step the policy is its reference: the DPO loss is log 2; a step on its pairs lowers it.
    (learned,) = of(events, "learned")
    assert abs(learned["loss_before"] - 0.6931) < 1e-3 and learned["loss_after"] < learned["loss_before"]
    (checkpoint,) = of(events, "checkpoint")
    assert checkpoint["kind"] == "policy"
    model = AutoModelForCausalLM.from_pretrained(checkpoint["path"])
    out = model.generate(**model.dummy_inputs, max_new_tokens=3, do_sample=False)
    assert out.shape[1] > model.dummy_inputs["input_ids"].shape[1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "ppo"}, "config.kind must be one of sft, reward, dpo, grpo"),
        ({"data": {"train_file": "/nonexistent/x.jsonl"}}, "config.data.train_file: no such file"),
        ({"model": {"base_model": "/nonexistent"}}, "is not a model directory"),
        (
            {"kind": "grpo", "rl": {"batch_size": 3, "num_generations": 2}},
            "rl.batch_size (3) must be a multiple of rl.num_generations (2)",
        ),
        ({"rl": {"learning_rate": "fast"}}, "config.rl.learning_rate must be a number"),
    ],
)
def test_a_bad_config_fails_with_one_clear_line_and_no_checkpoint(
    tiny: Path, tmp_path: Path, change: dict[str, object], message: str
) -> None:
    data = write_jsonl(tmp_path / "sft.jsonl", sft_rows())
    config = run_config(tmp_path / "run", "sft", tiny, data, {})
    config.update(change)
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    code, events = train_in_process(tmp_path / "run")
    assert code == 2
    assert message in events[-1]["error"]
    assert not (tmp_path / "run" / "out").exists()


def test_unreadable_rows_fail_with_the_line_number(tiny: Path, tmp_path: Path) -> None:
    data = tmp_path / "sft.jsonl"
    data.write_text(json.dumps(sft_rows()[0]) + "\n{not json\n")
    run_config(tmp_path / "run", "sft", tiny, data, {})
    code, events = train_in_process(tmp_path / "run")
    assert code == 2 and "sft.jsonl line 2: not JSON" in events[-1]["error"]


def test_a_saved_config_loses_its_quantization_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "quantization_config": {"bits": 4}}))
    clean_checkpoint(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text()) == {"model_type": "llama"}
