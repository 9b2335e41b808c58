"""What the LLM policies share: the tool-calling chat template and reading a tool call out of text.

Plain Python, no Django, no torch. Small models get the `<tool_call>` convention only roughly
right, so the reader is lenient about shape (arguments as a JSON string, a bare JSON object, a
missing closing tag, Python-style quotes) but never guesses a tool name.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patches import pysource
from trajectories.policies.base import Message, ToolCall

TOOL_TEMPLATE_PATH = Path(__file__).with_name("chatml_tools.jinja")
OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
# Shown to the model as the observation after a reply without a usable call, so it says how to fix it.
FORMAT_HINT = 'Reply with exactly one <tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>.'
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*$")
_MAX_BARE_CANDIDATES = 64  # '{' positions tried when looking for an untagged call: replies are short


def load_tool_template() -> str:
    return TOOL_TEMPLATE_PATH.read_text(encoding="utf-8")


def template_supports_tools(template: str | None) -> bool:
    """A template that never mentions `tools` would silently drop the schemas from the prompt."""
    return bool(template) and "tools" in str(template)


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.to_openai() for m in messages]


def derive_seed(seed: int | None, *parts: Any) -> int:
    """One sampling seed per call: a function of the policy seed and the conversation.

    Seeding every call with the bare policy seed would replay the same random stream at every
    step; seeding once per policy would make a step depend on what the policy did before (and on
    which trajectory reused it). Hashing the conversation keeps a step reproducible on its own.
    With no seed, fresh entropy: torch's default generator starts from a fixed seed in every process.
    """
    if seed is None:
        return secrets.randbits(63)
    blob = json.dumps([seed, *parts], sort_keys=True, default=str).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") & (2**63 - 1)


@dataclass
class ParsedReply:
    thought: str
    tool_call: ToolCall | None
    error: str | None = None


def parse_tool_call(text: str | None) -> ParsedReply:
    """The first tool call in a model's text reply, and the text before it as the thought."""
    text = text or ""
    start = text.find(OPEN_TAG)
    if start >= 0:
        thought = text[:start].strip()
        body_start = start + len(OPEN_TAG)
        end = text.find(CLOSE_TAG, body_start)
        # No closing tag: the reply ran out of tokens or a stop string cut it; the JSON may be whole.
        body = text[body_start:] if end < 0 else text[body_start:end]
        obj, why = _read_object(body)
        if obj is None:
            return ParsedReply(thought, None, f"could not read the tool call: {why}. {FORMAT_HINT}")
        call, why = call_from_object(obj)
        return ParsedReply(thought, call, None if call else f"{why}. {FORMAT_HINT}")
    bare = _find_bare_call(text)
    if bare is not None:
        thought, call = bare
        return ParsedReply(thought, call)
    if not text.strip():
        return ParsedReply("", None, f"the reply was empty. {FORMAT_HINT}")
    return ParsedReply(text.strip(), None, f"the reply has no tool call. {FORMAT_HINT}")


def call_from_object(obj: Any, call_id: str = "call_0") -> tuple[ToolCall | None, str]:
    """A ToolCall from {"name", "arguments"} (or OpenAI's {"function": {...}}), else why not."""
    if not isinstance(obj, dict):
        return None, "the tool call is not a JSON object"
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, 'the tool call has no "name"'
    args, why = parse_arguments(obj.get("arguments", obj.get("parameters")))
    if args is None:
        return None, why
    return ToolCall(name=name.strip(), arguments=args, id=call_id), ""


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str]:
    """Arguments as a dict: given as an object, or as a JSON string of one (the OpenAI wire format)."""
    if raw is None:
        return {}, ""
    if isinstance(raw, dict):
        return raw, ""
    if isinstance(raw, str):
        if not raw.strip():
            return {}, ""
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            return None, f"the tool call's arguments are not valid JSON ({exc.msg} at {exc.pos})"
        if isinstance(value, dict):
            return value, ""
    return None, 'the tool call\'s "arguments" must be a JSON object'


def _read_object(body: str) -> tuple[Any, str]:
    body = body.strip()
    body = re.sub(r"^```[a-zA-Z0-9_-]*\s*", "", body)  # a fence inside the tags
    first = body.find("{")
    if first < 0:
        return None, "no JSON object inside <tool_call>"
    try:
        # raw_decode stops at the end of the object: trailing junk (an extra brace, prose) is ignored.
        return json.JSONDecoder().raw_decode(body, first)[0], ""
    except json.JSONDecodeError as exc:
        error = f"invalid JSON inside <tool_call> ({exc.msg})"
    last = body.rfind("}")
    if last > first:
        # Small models often write a Python dict (single quotes, True/None); literal_eval runs no code.
        try:
            value = pysource.literal_eval(body[first : last + 1])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
        else:
            return value, ""
    return None, error


def _find_bare_call(text: str) -> tuple[str, ToolCall] | None:
    """An untagged {"name": ..., "arguments": ...} anywhere in the text (often in a ```json fence)."""
    decoder = json.JSONDecoder()
    pos = text.find("{")
    tried = 0
    while pos >= 0 and tried < _MAX_BARE_CANDIDATES:
        tried += 1
        try:
            obj, _ = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and ("arguments" in obj or "parameters" in obj or "function" in obj):
            call, _why = call_from_object(obj)
            if call is not None:
                return _FENCE.sub("", text[:pos].rstrip()).strip(), call
        pos = text.find("{", pos + 1)
    return None
