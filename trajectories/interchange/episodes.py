"""Token-level episodes for verl / rLLM-style trainers: `prompt_ids`, `response_ids` and a loss mask.

The chat is the one the policy had (trajectories.conversation), rendered with the tokenizer's
own chat template and the tool schemas. The prompt is the system prompt and the task statement
with the generation prompt; the response is every turn after it, where the assistant's own
tokens have mask 1 and what the environment said (tool observations, the template's turn
headers) has mask 0, so a trainer learns only from what the policy produced.

Rendering the chat prefix by prefix and tokenizing each added piece keeps the pieces aligned
with the template's text; a template that rewrites earlier turns when a later one is added
(some reasoning models' templates drop old thoughts) cannot be split like this and is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trajectories.conversation import TOOLS, RecordedStep, conversation


class EpisodeError(ValueError):
    pass


def load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer  # heavy; only this export needs it

    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise EpisodeError(f"cannot load a tokenizer from {path}: {str(exc).splitlines()[0][:200]}") from None
    if not getattr(tokenizer, "chat_template", None):
        raise EpisodeError(f"the tokenizer at {path} has no chat template")
    return tokenizer


def _render(tokenizer: Any, messages: list[dict[str, Any]], generation: bool) -> str:
    text: str = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=generation)
    return text


def _ids(tokenizer: Any, text: str) -> list[int]:
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids


def episode(tokenizer: Any, trajectory: dict[str, Any], statement: str) -> dict[str, Any]:
    steps: Iterable[RecordedStep] = (
        RecordedStep(s["action_type"], s["action_input"], s.get("thought") or "", s.get("observation") or "")
        for s in trajectory["steps"]
    )
    messages = conversation(statement, steps)
    prompt_text = _render(tokenizer, messages[:2], generation=True)
    response_ids: list[int] = []
    loss_mask: list[int] = []
    done = prompt_text
    for end in range(3, len(messages) + 1):
        message = messages[end - 1]
        if message["role"] == "assistant":
            header = _render(tokenizer, messages[: end - 1], generation=True)
            if not header.startswith(done):
                raise EpisodeError("the chat template rewrites earlier turns; it cannot be split into episodes")
            piece = header[len(done) :]
            ids = _ids(tokenizer, piece)
            response_ids += ids
            loss_mask += [0] * len(ids)
            done = header
        full = _render(tokenizer, messages[:end], generation=False)
        if not full.startswith(done):
            raise EpisodeError("the chat template rewrites earlier turns; it cannot be split into episodes")
        ids = _ids(tokenizer, full[len(done) :])
        response_ids += ids
        loss_mask += [1 if message["role"] == "assistant" else 0] * len(ids)
        done = full
    return {
        "trajectory_id": trajectory["trajectory_id"],
        "task_id": trajectory["task_id"],
        "prompt_ids": _ids(tokenizer, prompt_text),
        "response_ids": response_ids,
        "loss_mask": loss_mask,
        "reward": trajectory.get("final_reward"),
        "success": trajectory.get("success"),
    }
