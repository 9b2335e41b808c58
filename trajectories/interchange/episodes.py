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
from typing import Any, TypeGuard

from tasks.lang_tests import PYTHON
from trajectories.conversation import TOOLS, RecordedStep, conversation
from trajectories.schema import MODEL_CALL


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


def _sampled_turns(trajectory: dict[str, Any]) -> list[tuple[list[int], list[int], list[float] | None]] | None:
    """Each step's (prompt ids, completion ids, logprobs) as sampled; None unless every step has them."""
    turns = []
    for step in trajectory["steps"]:
        call = step.get(MODEL_CALL)
        prompt = call.get("prompt_token_ids") if isinstance(call, dict) else None
        completion = call.get("completion_token_ids") if isinstance(call, dict) else None
        if not (_int_list(prompt) and _int_list(completion)):
            return None
        logprobs = call.get("logprobs")
        aligned = isinstance(logprobs, list) and len(logprobs) == len(completion)
        turns.append((prompt, completion, logprobs if aligned else None))
    return turns or None


def _int_list(value: Any) -> TypeGuard[list[int]]:
    return isinstance(value, list) and bool(value) and all(type(v) is int and v >= 0 for v in value)


def _from_samples(turns: list[tuple[list[int], list[int], list[float] | None]]) -> dict[str, Any] | None:
    """The episode in the server's own tokens: none tokenized again.

    A turn's prompt is the last turn's prompt and completion extended by what the environment said
    (the tool observation and the template's turn headers, mask 0). A server whose prompt is not
    such an extension (a template that rewrote an earlier turn) gives None: the caller renders.
    The observation after the last turn is in no prompt, so it is not in the episode (it carries no loss).
    """
    prompt_ids = turns[0][0]
    response_ids: list[int] = []
    loss_mask: list[int] = []
    logprobs: list[float | None] = []
    seen = list(prompt_ids)
    for number, (prompt, completion, sampled) in enumerate(turns):
        if number:
            if prompt[: len(seen)] != seen:
                return None
            told = prompt[len(seen) :]
            response_ids += told
            loss_mask += [0] * len(told)
            logprobs += [None] * len(told)
        response_ids += completion
        loss_mask += [1] * len(completion)
        logprobs += list(sampled) if sampled is not None else [None] * len(completion)
        seen = prompt + completion
    return {"prompt_ids": prompt_ids, "response_ids": response_ids, "loss_mask": loss_mask, "logprobs": logprobs}


def _mismatches(trajectory: dict[str, Any], rendered: list[list[int]], special: set[int]) -> int:
    """Assistant turns whose sampled ids (where the server sent them) are not how the tokenizer renders the turn."""
    count = 0
    for step, ids in zip(trajectory["steps"], rendered, strict=False):
        call = step.get(MODEL_CALL)
        sampled = call.get("completion_token_ids") if isinstance(call, dict) else None
        if not _int_list(sampled):
            continue
        # A sample may end with a stop token the rendering writes as another end-of-turn token.
        kept = sampled[:-1] if sampled[-1] in special else sampled
        if ids[: len(kept)] != kept or not kept and sampled[-1] not in ids:
            count += 1
    return count


def episode(tokenizer: Any, trajectory: dict[str, Any], statement: str, language: str = PYTHON) -> dict[str, Any]:
    """The episode in the sampled tokens when every step has them, else rendered (and any mismatch counted)."""
    head = {"trajectory_id": trajectory["trajectory_id"], "task_id": trajectory["task_id"]}
    tail = {"reward": trajectory.get("final_reward"), "success": trajectory.get("success")}
    turns = _sampled_turns(trajectory)
    faithful = _from_samples(turns) if turns else None
    if faithful is not None:
        return {**head, **faithful, **tail, "token_source": "sampled", "retokenization_mismatches": 0}
    rendered, assistant_ids = _rendered(tokenizer, trajectory, statement, language)
    mismatches = _mismatches(trajectory, assistant_ids, set(getattr(tokenizer, "all_special_ids", [])))
    return {**head, **rendered, **tail, "token_source": "rendered", "retokenization_mismatches": mismatches}


def _rendered(
    tokenizer: Any, trajectory: dict[str, Any], statement: str, language: str
) -> tuple[dict[str, Any], list[list[int]]]:
    steps: Iterable[RecordedStep] = (
        RecordedStep(s["action_type"], s["action_input"], s.get("thought") or "", s.get("observation") or "")
        for s in trajectory["steps"]
    )
    messages = conversation(statement, steps, language)  # the system prompt names the task's language
    prompt_text = _render(tokenizer, messages[:2], generation=True)
    response_ids: list[int] = []
    loss_mask: list[int] = []
    assistant_ids: list[list[int]] = []
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
        if message["role"] == "assistant":
            assistant_ids.append(ids)
        done = full
    row = {"prompt_ids": _ids(tokenizer, prompt_text), "response_ids": response_ids, "loss_mask": loss_mask}
    return row, assistant_ids
