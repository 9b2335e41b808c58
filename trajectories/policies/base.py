"""The contract between the agent loop and a policy. Plain Python, no Django.

The loop sends the conversation so far (OpenAI chat format) and the tool schemas; the
policy answers with at most one tool call plus any text it produced before it (its
"thought"). A reply the policy could not turn into a tool call comes back with
`tool_call=None` and `error` saying why; the loop shows that error to the model as the
observation, and it counts as a step.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from trajectories.policies.sampled import SampledTokens
from trajectories.schema import MODEL_RAW_MAX, ModelCall


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
    generate_ms: float | None = None  # time in generation proper (model policies only)
    sampled: SampledTokens = field(default_factory=lambda: SampledTokens())  # ids and logprobs the server sent
    fingerprint: str = ""  # the server's system_fingerprint (which weights answered), checked plain

    def model_call(self) -> ModelCall | None:
        """The step's model record (trajectories.schema.ModelCall); None for policies that are no model."""
        if self.generate_ms is None:
            return None
        completion = self.usage.get("completion_tokens")
        rate = completion / (self.generate_ms / 1000) if completion and self.generate_ms > 0 else None
        raw = self.raw if len(self.raw) <= MODEL_RAW_MAX else self.raw[:MODEL_RAW_MAX] + " [...]"
        call: ModelCall = {
            "raw": raw,
            "prompt_tokens": self.usage.get("prompt_tokens"),
            "completion_tokens": completion,
            "generate_ms": round(self.generate_ms, 3),
            "tokens_per_s": round(rate, 2) if rate is not None else None,
        }
        call.update(self.sampled)  # type: ignore[typeddict-item]
        if self.fingerprint:
            call["system_fingerprint"] = self.fingerprint
        return call


class PolicyError(RuntimeError):
    """The policy itself failed (server down, model missing): the trajectory ends in error."""


# The error of an episode stopped by a cancel, whether the policy or the agent loop saw it first.
CANCELLED = "cancelled"


class PolicyCancelled(PolicyError):
    """act() saw `stop_event` set and gave up mid-way; its message is CANCELLED."""


class Policy(ABC):
    kind: str
    # Set by whoever runs the policy (trajectories.runner) when the run is cancelled; a policy
    # whose act() can take long (a local generation) should stop early once it is set.
    stop_event: threading.Event | None = None

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Provenance for the trajectory: kind, model, checkpoint, temperature, top_p, seed."""

    @abstractmethod
    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        """The next action. Must not raise for a malformed model reply (return error instead)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model, the HTTP client, ..."""
