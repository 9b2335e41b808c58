"""Every place that renders what the agent was shown of a Go or JavaScript task gives the system
prompt of that task's language, never Python's: the transcript and its "whole request", the SFT
export, the episodes export's rendered fallback, the reward model's judged chat, and GRPO's
single-turn prompt. Each renders a chat of its own from the steps, so each must be told."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tasks.lang_tests import GO, JAVASCRIPT, PYTHON
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from training.trainers.grpo_env import patch_system_prompt, single_turn_prompt
from trajectories.agent import system_prompt
from trajectories.conversation import judged_conversation
from trajectories.exports import TaskPrompts, iter_trajectory_lines
from trajectories.interchange.episodes import episode
from trajectories.models import Trajectory
from trajectories.transcript import build_transcript, request_messages
from webapp.export_kinds import _sft_rows


def _trajectory(language: str | None) -> Trajectory:
    metadata = {} if language is None else {"language": language}
    task = TaskFactory.create(metadata=metadata, statement="Fix the off-by-one in Page.")
    trajectory: Trajectory = TrajectoryFactory.create(task=task, prompt="Fix the off-by-one in Page.")
    StepFactory.create(trajectory=trajectory, step=1, action_type="read_file", action_input="page.go")
    StepFactory.create(trajectory=trajectory, step=2, action_type="submit", action_input="", observation="")
    return trajectory


class _Chars:
    """A tokenizer whose tokens are characters: enough for the episode renderer to run."""

    all_special_ids: list[int] = []

    def apply_chat_template(self, messages: list[dict[str, Any]], **_: Any) -> str:
        return "".join(f"<{m['role']}>{m.get('content') or ''}" for m in messages)

    def encode(self, text: str, **_: Any) -> list[int]:
        return [ord(c) for c in text]

    def __call__(self, text: str, **_: Any) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text)}


@pytest.mark.django_db
@pytest.mark.parametrize("language", [GO, JAVASCRIPT, None])
def test_every_rendering_of_a_trajectory_names_its_tasks_language(language: str | None) -> None:
    trajectory = _trajectory(language)
    expected = system_prompt(language or PYTHON)
    assert trajectory.language == (language or PYTHON)
    if language is not None:
        assert expected != system_prompt(PYTHON)

    transcript = build_transcript(trajectory)
    assert transcript.steps[0].new_messages[0].content == expected
    assert request_messages(trajectory, 2)[0]["content"] == expected

    record = json.loads(next(iter_trajectory_lines(Trajectory.objects.filter(pk=trajectory.pk))))
    sft = next(_sft_rows([record]))
    assert sft["messages"][0]["content"] == expected

    prompts = TaskPrompts()
    assert (prompts(record), prompts.language(record)) == ("Fix the off-by-one in Page.", language or PYTHON)
    rendered = episode(_Chars(), record, prompts(record), prompts.language(record))
    assert "".join(map(chr, rendered["prompt_ids"])).startswith(f"<system>{expected}")

    judged = judged_conversation("s", [], "diff", trajectory.language)
    assert judged[0]["content"] == expected


def test_the_single_turn_prompt_names_the_language_and_keeps_pythons_text() -> None:
    assert "a Python repository" in patch_system_prompt(PYTHON)
    assert "a Go repository" in patch_system_prompt(GO)
    assert "a JavaScript/TypeScript repository" in patch_system_prompt(JAVASCRIPT)
    system, _ = single_turn_prompt("Fix it.", "/nonexistent", GO)
    assert system["content"] == patch_system_prompt(GO)
