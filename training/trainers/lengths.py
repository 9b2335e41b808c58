"""How long a trainer's rows are, and the rl.max_length that keeps every one's last assistant turn.

Plain Python (the trainer subprocess has no Django): the tokenizer is handed in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.trainers.common import TrainerError


@dataclass(frozen=True)
class RowLength:
    """A training row as its trainer tokenizes it."""

    tokens: int
    needed: int  # tokens up to the end of its last assistant turn: what max_length must keep


@dataclass(frozen=True)
class LengthFit:
    max_length: int
    longer: int  # rows longer than max_length: cut at the end (sft, dpo) or dropped (reward)
    context: int | None


def model_context(path: Path) -> int | None:
    """The most positions the model was built for (its config's max_position_embeddings), if it says."""
    try:
        saved = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return None
    found = saved.get("max_position_embeddings") if isinstance(saved, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else None


def measure(tokenizer: Any, messages: list[dict[str, Any]], tools: Any) -> RowLength:
    """A chat's length as TRL's trainers tokenize it (the chat template with the tools), and where its
    last assistant token ends (the template's {% generation %} markers)."""
    tools = json.loads(tools) if isinstance(tools, str) else tools
    encoded = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = encoded["input_ids"], encoded.get("assistant_masks") or []
    ends = [index + 1 for index, bit in enumerate(mask) if bit]
    return RowLength(tokens=len(ids), needed=ends[-1] if ends else len(ids))


def fit_max_length(given: int | None, rows: list[RowLength], context: int | None, *, cuts: bool) -> LengthFit:
    """rl.max_length for these rows: as given, or the longest row (at most the model's context).

    Where the trainer cuts a longer row at its end (`cuts`: sft, dpo), a given value that would cut
    a row's last assistant turn is refused: that turn is the action the row teaches, and training on
    its first tokens alone teaches a fragment while saying nothing of it."""
    if not rows:
        raise TrainerError("no rows to train on")
    longest = max(row.tokens for row in rows)
    needed = max(row.needed for row in rows)
    if given is None:
        length = max(min(longest, context) if context else longest, 1)
    else:
        length = given
        cut = sum(row.needed > given for row in rows)
        if cuts and cut:
            beyond = (
                f", more than the model's context ({context}): shorten those rows"
                if context and needed > context
                else ""
            )
            raise TrainerError(
                f"rl.max_length ({given}) would cut the last assistant turn of {cut} of {len(rows)} rows: "
                f"they need rl.max_length of at least {needed}{beyond}; or leave rl.max_length out to use "
                f"the longest row ({longest} tokens)"
            )
    return LengthFit(max_length=length, longer=sum(row.tokens > length for row in rows), context=context)
