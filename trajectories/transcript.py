"""A trajectory as its model saw it: per step the messages sent, the raw reply, the parsed
tool call, token counts and timings (what Inspect and OpenHands users expect to read).

The chat is rebuilt with trajectories.conversation (the same chat the agent loop and the
training exports use). Model facts come from Step.extra["model"] = {"raw", "prompt_tokens",
"completion_tokens", "generate_ms", "tokens_per_s"}, which the hf and openai policies record;
any of them may be missing (scripted and imported trajectories), and the page says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet
from django.db.models.functions import Left, Length

from trajectories.conversation import RecordedStep, conversation
from trajectories.models import Step, Trajectory

STEP_PAGE = 50
# Characters of one message shown on the page; the whole request is one click away as JSON.
MESSAGE_SHOWN = 4000
MODEL_KEYS = ("raw", "prompt_tokens", "completion_tokens", "generate_ms", "tokens_per_s")
TOTALLED = ("prompt_tokens", "completion_tokens", "generate_ms")


class TranscriptError(ValueError):
    pass


@dataclass
class ShownMessage:
    role: str
    content: str
    length: int  # of the whole content, before it was cut for the page
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "arguments"}]
    name: str = ""

    @property
    def cut(self) -> bool:
        return self.length > len(self.content)


@dataclass
class TranscriptStep:
    number: int
    action_type: str
    # What this request added to the chat: the prompt for the first step; for later ones the
    # previous step's result, already shown above it, so nothing here.
    new_messages: list[ShownMessage]
    sent_count: int  # messages in the whole request
    reply: ShownMessage | None  # the assistant message the step recorded
    results: list[ShownMessage]  # what came back: the tool's observation (or the format error)
    model: dict[str, Any]  # the keys of MODEL_KEYS that were recorded
    duration_ms: float | None
    policy_ms: float | None
    exit_code: int | None

    @property
    def has_model(self) -> bool:
        return bool(self.model)


@dataclass
class Transcript:
    trajectory: Trajectory
    steps: list[TranscriptStep]
    page: int
    pages: int
    totals: dict[str, float]  # summed token counts and model time over every step


def statement_of(trajectory: Trajectory) -> str:
    """The user message the policy was given: the task's statement (the prompt, for an unknown task)."""
    if trajectory.task is not None:
        return trajectory.task.statement
    return trajectory.prompt


def _model_facts(extra: object) -> dict[str, Any]:
    model = extra.get("model") if isinstance(extra, dict) else None
    if not isinstance(model, dict):
        return {}
    return {key: model[key] for key in MODEL_KEYS if model.get(key) is not None}


def _shown(message: dict[str, Any]) -> ShownMessage:
    content = message.get("content") or ""
    content = content if isinstance(content, str) else json.dumps(content)
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        arguments = function.get("arguments", "")
        try:
            arguments = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
        except (TypeError, ValueError):
            pass  # shown as the text it is
        calls.append({"name": function.get("name", ""), "arguments": arguments})
    return ShownMessage(
        role=str(message.get("role", "")),
        content=content[:MESSAGE_SHOWN],
        length=len(content),
        tool_calls=calls,
        name=str(message.get("name") or ""),
    )


def _recorded(rows: list[dict[str, Any]]) -> list[RecordedStep]:
    return [RecordedStep(r["action_type"], r["action_input"], r["thought"], r["observation"]) for r in rows]


def _steps(trajectory: Trajectory) -> QuerySet[Step]:
    return trajectory.steps.order_by("step")


def model_totals(trajectory: Trajectory) -> dict[str, float]:
    """Token counts and model time summed over every step, read from the JSON in the database."""
    totals: dict[str, float] = dict.fromkeys(TOTALLED, 0.0)
    fields = [f"extra__model__{key}" for key in TOTALLED]
    for values in _steps(trajectory).values_list(*fields):
        for key, value in zip(TOTALLED, values, strict=True):
            if isinstance(value, int | float) and not isinstance(value, bool):
                totals[key] += value
    return totals


def build_transcript(trajectory: Trajectory, page: int = 1) -> Transcript:
    """One page of the transcript.

    Only the steps up to the page's last are read (a step's request is the chat before it),
    and their texts are cut in the database to what the page shows: a long run's
    observations can be megabytes, and each is shown once, as the message after its step.
    """
    pages = max(1, -(-_steps(trajectory).count() // STEP_PAGE))
    page = min(max(1, page), pages)
    rows: list[dict[str, Any]] = [
        dict(row)
        for row in _steps(trajectory)[: page * STEP_PAGE].values(
            "step", "action_type", "action_input", "duration_ms", "exit_code", "extra",
            thought_cut=Left("thought", MESSAGE_SHOWN + 1),
            observation_cut=Left("observation", MESSAGE_SHOWN + 1),
            thought_len=Length("thought"),
            observation_len=Length("observation"),
        )
    ]  # fmt: skip
    for row in rows:
        row["thought"], row["observation"] = row["thought_cut"], row["observation_cut"]
    messages = conversation(statement_of(trajectory), _recorded(rows), trajectory.language)
    base = len(conversation(statement_of(trajectory), [], trajectory.language))
    per_step = (len(messages) - base) // len(rows) if rows else 0
    lengths = {"thought": [r["thought_len"] for r in rows], "observation": [r["observation_len"] for r in rows]}
    totals = model_totals(trajectory)
    shown: list[TranscriptStep] = []
    for index in range((page - 1) * STEP_PAGE, min(page * STEP_PAGE, len(rows))):
        row = rows[index]
        sent = base + index * per_step  # every message before this step's reply
        new = [_shown(m) for m in messages[:sent]] if index == 0 else []
        reply = _shown(messages[sent]) if sent < len(messages) else None
        if reply is not None:
            reply.length = max(reply.length, lengths["thought"][index] or 0)
        results = [_shown(m) for m in messages[sent + 1 : sent + per_step]]
        if results:
            results[-1].length = max(results[-1].length, lengths["observation"][index] or 0)
        extra = row["extra"] if isinstance(row["extra"], dict) else {}
        policy_ms = extra.get("policy_ms")
        shown.append(
            TranscriptStep(
                number=row["step"],
                action_type=row["action_type"],
                new_messages=new,
                sent_count=sent,
                reply=reply,
                results=results,
                model=_model_facts(extra),
                duration_ms=row["duration_ms"],
                policy_ms=policy_ms if isinstance(policy_ms, int | float) else None,
                exit_code=row["exit_code"],
            )
        )
    return Transcript(trajectory, shown, page, pages, totals)


def request_messages(trajectory: Trajectory, number: int) -> list[dict[str, Any]]:
    """Exactly the chat sent for step `number`'s reply, uncut (the JSON behind "whole request")."""
    rows: list[dict[str, Any]] = [
        dict(row)
        for row in _steps(trajectory)
        .filter(step__lt=number)
        .values("action_type", "action_input", "thought", "observation")
    ]
    if not _steps(trajectory).filter(step=number).exists():
        raise TranscriptError(f"this trajectory has no step {number}")
    return conversation(statement_of(trajectory), _recorded(rows), trajectory.language)
