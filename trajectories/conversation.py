"""A recorded trajectory as the chat the agent had: the messages a policy saw and sent.

Plain Python (no Django). The agent loop builds these messages as it goes; training data
(SFT conversations, the `prompt` of a preference pair, GRPO prompts) must be the same chat,
in the same tool-call format, or a policy learns a dialect it is never spoken to in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trajectories.agent import SYSTEM_PROMPT, turn_messages
from trajectories.policies.base import Message
from trajectories.policies.replay import call_for
from trajectories.tools import TOOLS

__all__ = ["TOOLS", "RecordedStep", "conversation", "prompt_messages"]


@dataclass(frozen=True)
class RecordedStep:
    action_type: str
    action_input: Any
    thought: str = ""
    observation: str = ""


def prompt_messages(statement: str) -> list[dict[str, Any]]:
    """What a policy is shown before its first step: the system prompt and the task statement."""
    return [Message("system", SYSTEM_PROMPT).to_openai(), Message("user", statement).to_openai()]


def conversation(statement: str, steps: Iterable[RecordedStep]) -> list[dict[str, Any]]:
    """The whole chat in OpenAI message form: prompt, then per step the assistant's tool call
    and the tool's observation (an invalid step is the model's text and the format error)."""
    messages = [Message("system", SYSTEM_PROMPT), Message("user", statement)]
    for number, step in enumerate(steps, start=1):
        call = call_for(step.action_type, step.action_input)
        thought = step.thought
        if call is None and not thought and isinstance(step.action_input, str):
            thought = step.action_input  # an invalid step records the raw reply as its input
        messages += turn_messages(call, thought, step.observation, number)
    return [m.to_openai() for m in messages]
