"""The contract between the agent loop and a policy. Plain Python, no Django.

The loop sends the conversation so far (OpenAI chat format) and the tool schemas; the
policy answers with at most one tool call plus any text it produced before it (its
"thought"). A reply the policy could not turn into a tool call comes back with
`tool_call=None` and `error` saying why; the loop shows that error to the model as the
observation, and it counts as a step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = "call_0"


@dataclass
class Message:
    role: str  # system | user | assistant | tool
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)  # assistant messages only
    tool_call_id: str | None = None  # tool messages only
    name: str | None = None  # tool messages: the tool's name

    def to_openai(self) -> dict[str, Any]:
        """The message as the OpenAI chat-completions API (and HF chat templates) expect it."""
        import json

        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out


@dataclass
class PolicyOutput:
    thought: str  # text before (or instead of) the tool call
    tool_call: ToolCall | None
    raw: str = ""  # the model's raw output, for debugging malformed replies
    error: str | None = None  # why no tool call could be read from the reply
    latency_ms: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens


class PolicyError(RuntimeError):
    """The policy itself failed (server down, model missing): the trajectory ends in error."""


class Policy(ABC):
    kind: str

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Provenance for the trajectory: kind, model, checkpoint, temperature, top_p, seed."""

    @abstractmethod
    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        """The next action. Must not raise for a malformed model reply (return error instead)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model, the HTTP client, ..."""
