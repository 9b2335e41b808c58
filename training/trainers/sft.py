"""Rejection-sampling fine-tuning: SFT on verified successful trajectories (docs/training.md).

Each row is one trajectory as the chat the agent had (`trajectories.conversation`), rendered with
the same tool-call template the `hf` policy prompts with. Loss only on the assistant's tokens:
the template's `{% generation %}` markers cover the assistant turns, so the system prompt, the
task statement and every tool observation are masked out.
"""

from __future__ import annotations

import json
from typing import Any

from training.trainers.common import (
    TrainerConfig,
    TrainerError,
    finish_setup,
    load_tokenizer,
    log,
    peft_config,
    quantized,
    read_jsonl,
    run_training,
    torch_dtype,
    training_arguments,
)
from training.trainers.events import EventCallback
from training.trainers.lengths import fit_max_length, measure, model_context

ROLES = frozenset({"system", "user", "assistant", "tool"})


def sft_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Conversations in the shape SFTTrainer reads; tools kept as JSON text so every row has one type."""
    out = []
    for number, row in enumerate(rows, start=1):
        messages = row["messages"]
        if not isinstance(messages, list) or not messages:
            raise TrainerError(f"row {number}: messages must be a non-empty list")
        for message in messages:
            if not isinstance(message, dict) or message.get("role") not in ROLES:
                raise TrainerError(f"row {number}: every message needs a role in {', '.join(sorted(ROLES))}")
        if not any(m["role"] == "assistant" for m in messages):
            raise TrainerError(f"row {number}: no assistant message to learn from")
        tools = row.get("tools") or []
        out.append({"messages": [plain_message(m) for m in messages], "tools": json.dumps(tools)})
    return out


def plain_message(message: dict[str, Any]) -> dict[str, Any]:
    """One schema for every message (Arrow needs it): absent fields become None or empty."""
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call)
        arguments = fn.get("arguments", {})
        calls.append(
            {
                "id": str(call.get("id", "")),
                "type": "function",
                # A JSON string, as OpenAI sends it: the template writes it verbatim.
                "function": {
                    "name": str(fn.get("name", "")),
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    return {
        "role": message["role"],
        "content": str(message.get("content") or ""),
        "tool_calls": calls or None,
        "tool_call_id": message.get("tool_call_id"),
        "name": message.get("name"),
    }


def train(config: TrainerConfig) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    rows = sft_rows(read_jsonl(config.train_file, ("messages",)))
    tokenizer = load_tokenizer(config.base_model)
    fit = fit_max_length(
        config.max_length,
        [measure(tokenizer, row["messages"], row["tools"]) for row in rows],
        model_context(config.base_model),
        cuts=True,  # keep_start: a longer conversation loses its end
    )
    log(f"sft: max_length {fit.max_length} ({'given' if config.max_length else 'the longest row'})")
    model = AutoModelForCausalLM.from_pretrained(str(config.base_model), dtype=torch_dtype(config), **quantized(config))
    args = SFTConfig(
        **training_arguments(config),
        max_length=fit.max_length,
        # Keep the start: the first turns are where the task and the first tool calls are.
        truncation_mode="keep_start",
        assistant_only_loss=True,
        packing=False,
    )
    callback = EventCallback("policy", config=config)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[callback],
        peft_config=peft_config(config, model, "CAUSAL_LM"),
    )
    finish_setup(trainer)
    kept = len(trainer.train_dataset)  # type: ignore[arg-type]  # a Dataset here, not a stream
    dropped = len(rows) - kept
    if dropped == len(rows):
        raise TrainerError(
            f"every one of the {len(rows)} conversations has no assistant token within rl.max_length "
            f"({fit.max_length}): raise it, or leave it out to use the longest row"
        )
    if dropped:
        log(f"sft: {dropped} of {len(rows)} conversations had no assistant token within max_length")
    truncated = max(fit.longer - dropped, 0)
    if truncated:
        log(f"sft: {truncated} of {len(rows)} conversations are cut at {fit.max_length} tokens (the model's context)")
    callback.add_values({"dropped_for_length": float(dropped), "truncated_for_length": float(truncated)})
    run_training(trainer, config)
