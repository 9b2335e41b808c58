"""Replays a recorded trajectory's actions in a fresh sandbox: are the observations the same?"""

from __future__ import annotations

from typing import Any

from core.vocabulary import ActionType, PolicyKind
from trajectories.policies.base import Message, Policy, PolicyOutput, ToolCall

# Shorthand records keep a bare string as the action input; this is the argument it means.
PRIMARY_ARGUMENT: dict[str, str] = {
    ActionType.READ_FILE: "path",
    ActionType.RUN_COMMAND: "command",
    ActionType.SEARCH: "pattern",
    ActionType.WRITE_FILE: "path",
}


def call_for(action_type: str, action_input: Any) -> ToolCall | None:
    """The tool call that records as this step (tools are named after their action types, but for search_symbol)."""
    if action_type == ActionType.INVALID:
        return None
    if action_type == ActionType.SEARCH and isinstance(action_input, dict) and "symbol" in action_input:
        return ToolCall("search_symbol", {"name": action_input["symbol"]})
    if isinstance(action_input, dict):
        return ToolCall(action_type, action_input)
    if action_type == ActionType.RUN_TESTS:
        paths = {"paths": [action_input]} if isinstance(action_input, str) and action_input else {}
        return ToolCall(action_type, paths)
    if action_type in PRIMARY_ARGUMENT and isinstance(action_input, str):
        return ToolCall(action_type, {PRIMARY_ARGUMENT[action_type]: action_input})
    return ToolCall(action_type, {})


class ReplayPolicy(Policy):
    kind = PolicyKind.REPLAY

    def __init__(self, steps: list[dict[str, Any]], source: str = "") -> None:
        self.steps = steps
        self.source = source
        self.position = 0

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": f"replay:{self.source}",
            "checkpoint": "",
            "temperature": 0.0,
            "top_p": 1.0,
            "seed": 0,
        }

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        if self.position >= len(self.steps):
            return PolicyOutput("end of the recording", ToolCall(ActionType.SUBMIT, {}))
        step = self.steps[self.position]
        self.position += 1
        call = call_for(step["action_type"], step["action_input"])
        if call is None:
            return PolicyOutput(
                step.get("thought", ""),
                None,
                raw=str(step["action_input"]),
                error="the recorded step was not a valid tool call",
            )
        return PolicyOutput(step.get("thought", ""), call)
