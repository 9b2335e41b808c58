"""Preference rows (annotation.preferences' export) as TRL's conversational preference format.

`prompt` is the system prompt and statement; `chosen` / `rejected` are each trajectory's turns
after it (assistant tool calls and tool observations); `tools` the schemas as JSON text. A side
given as plain text (another trainer's export) becomes one assistant message.
"""

from __future__ import annotations

import json
from typing import Any

from training.trainers.common import TrainerError, read_jsonl
from training.trainers.lengths import RowLength, measure
from training.trainers.sft import ROLES, plain_message

PREFERENCE_KEYS = ("prompt", "chosen", "rejected")


def _messages(value: Any, role: str, where: str) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [plain_message({"role": role, "content": value})]
    if not isinstance(value, list) or not value:
        raise TrainerError(f"{where} must be text or a non-empty list of messages")
    for message in value:
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise TrainerError(f"{where}: every message needs a role in {', '.join(sorted(ROLES))}")
    return [plain_message(m) for m in value]


def preference_rows(path: Any) -> list[dict[str, Any]]:
    """The file's pairs; lineage columns (trajectory ids, verdict) are left out of training."""
    out = []
    for number, row in enumerate(read_jsonl(path, PREFERENCE_KEYS), start=1):
        tools = row.get("tools") or []
        if isinstance(tools, str):
            try:
                tools = json.loads(tools)
            except ValueError:
                raise TrainerError(f"row {number}: tools is not JSON") from None
        out.append(
            {
                "prompt": _messages(row["prompt"], "user", f"row {number} prompt"),
                "chosen": _messages(row["chosen"], "assistant", f"row {number} chosen"),
                "rejected": _messages(row["rejected"], "assistant", f"row {number} rejected"),
                "tools": json.dumps(tools),
            }
        )
    return out


def pair_lengths(tokenizer: Any, rows: list[dict[str, Any]]) -> list[RowLength]:
    """Each pair's longer side (prompt and side, as the trainers render them)."""
    out = []
    for row in rows:
        sides = [measure(tokenizer, row["prompt"] + row[side], row["tools"]) for side in ("chosen", "rejected")]
        out.append(RowLength(max(s.tokens for s in sides), max(s.needed for s in sides)))
    return out
