"""A recorded trajectory as the chat the agent had: the messages a policy saw and sent.

Plain Python (no Django). The agent loop builds these messages as it goes; training data
(SFT conversations, the `prompt` of a preference pair, GRPO prompts) must be the same chat,
in the same tool-call format, or a policy learns a dialect it is never spoken to in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.vocabulary import PairSides
from tasks.lang_tests import PYTHON
from trajectories.agent import system_prompt, turn_messages
from trajectories.policies.base import Message
from trajectories.policies.replay import call_for
from trajectories.tools import TOOLS

__all__ = [
    "TOOLS",
    "RecordedStep",
    "conversation",
    "judged_conversation",
    "pair_side",
    "prompt_messages",
    "submission_message",
]

# A patch shown to a trainer is bounded: the rows of a preference file must stay lines a reader takes.
MAX_SUBMISSION_CHARS = 100_000
SUBMITTED = "Submitted patch:"


@dataclass(frozen=True)
class RecordedStep:
    action_type: str
    action_input: Any
    thought: str = ""
    observation: str = ""


def prompt_messages(statement: str, language: str = PYTHON) -> list[dict[str, Any]]:
    """What a policy is shown before its first step: the system prompt of the task's language
    (tasks.lang_tests, metadata's "language") and the task statement."""
    return [Message("system", system_prompt(language)).to_openai(), Message("user", statement).to_openai()]


def conversation(statement: str, steps: Iterable[RecordedStep], language: str = PYTHON) -> list[dict[str, Any]]:
    """The whole chat in OpenAI message form: prompt, then per step the assistant's tool call
    and the tool's observation (an invalid step is the model's text and the format error)."""
    messages = [Message("system", system_prompt(language)), Message("user", statement)]
    for number, step in enumerate(steps, start=1):
        call = call_for(step.action_type, step.action_input)
        thought = step.thought
        if call is None and not thought and isinstance(step.action_input, str):
            thought = step.action_input  # an invalid step records the raw reply as its input
        messages += turn_messages(call, thought, step.observation, number)
    return [m.to_openai() for m in messages]


def submission_message(patch: str) -> dict[str, Any]:
    """The patch a trajectory submitted, as one last assistant turn. It is what a reviewer or the
    verifier judged: two trajectories whose steps read alike (an import that records only read and
    submit) differ in it alone, so a preference pair without it would prefer a text to itself."""
    if len(patch) > MAX_SUBMISSION_CHARS:
        cut = len(patch) - MAX_SUBMISSION_CHARS
        patch = f"{patch[:MAX_SUBMISSION_CHARS]}\n[... {cut} more characters of the patch not shown]"
    body = patch if patch.strip() else "(empty: no change to the repository)"
    return Message("assistant", f"{SUBMITTED}\n{body}").to_openai()


def judged_conversation(
    statement: str, steps: Iterable[RecordedStep], patch: str, language: str = PYTHON
) -> list[dict[str, Any]]:
    """The chat, then the submitted patch: one side of a preference pair as it was judged."""
    return [*conversation(statement, steps, language), submission_message(patch)]


def pair_side(
    statement: str, steps: Iterable[RecordedStep], patch: str, sides: PairSides, language: str = PYTHON
) -> list[dict[str, Any]]:
    """One side of a preference pair after its prompt: the turns and the patch, or the patch alone
    (PairSides.PATCH: a row as long as the patch, however many steps the trajectory took)."""
    if sides is PairSides.PATCH:
        return [submission_message(patch)]
    return judged_conversation(statement, steps, patch, language)[len(prompt_messages(statement, language)) :]
