"""The transcript view: what the model was sent, what it answered, what was parsed, at what cost."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User

from tests.conftest import client_for
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from trajectories.conversation import RecordedStep, conversation
from trajectories.models import Trajectory
from trajectories.transcript import MESSAGE_SHOWN

pytestmark = pytest.mark.django_db

RAW_1 = '<tool_call>{"name": "read_file", "arguments": {"path": "src/config.py"}}</tool_call>'


def model_run() -> Trajectory:
    task = TaskFactory.create(statement="parse_config('') crashes <script>alert(1)</script>")
    trajectory = TrajectoryFactory.create(task=task, policy_kind="hf", policy_model="smollm2-135m")
    StepFactory.create(
        trajectory=trajectory,
        step=1,
        action_type="read_file",
        action_input={"path": "src/config.py"},
        thought="Let me look first.",
        observation="def parse_config(text):\n    return dict(l.split('=') for l in text.splitlines())",
        duration_ms=3.5,
        extra={
            "policy_ms": 812.0,
            "model": {
                "raw": RAW_1,
                "prompt_tokens": 412,
                "completion_tokens": 31,
                "generate_ms": 790.4,
                "tokens_per_s": 39.2,
            },
        },
    )
    StepFactory.create(
        trajectory=trajectory,
        step=2,
        action_type="invalid",
        action_input="I think </pre><img src=x onerror=alert(2)> is the bug",
        thought="",
        observation="Your reply had no tool call. " + "x" * (MESSAGE_SHOWN + 500),
        extra={"model": {"raw": "I think </pre><img src=x onerror=alert(2)> is the bug", "completion_tokens": 12}},
    )
    StepFactory.create(trajectory=trajectory, step=3, action_type="submit", action_input={}, observation="submitted")
    return trajectory


def test_each_step_shows_what_was_sent_the_raw_reply_the_call_and_the_costs(reviewer: User) -> None:
    trajectory = model_run()
    response = client_for(reviewer).get(f"/trajectories/{trajectory.trajectory_id}/transcript/")
    assert response.status_code == 200
    html = response.content.decode()
    first, second, third = html.split('<li class="turn"')[1:4]
    # Step 1 was sent the system prompt and the task; it answered with a read_file call.
    assert "You are a software engineer" in first and "parse_config(&#x27;&#x27;) crashes &lt;script&gt;" in first
    assert "request of 2 messages" in first
    assert json.dumps({"path": "src/config.py"}, indent=2).replace('"', "&quot;") in first
    assert "<code>read_file</code>" in first and "parsed tool call" in first
    assert "412 prompt tokens" in first and "31 completion tokens" in first and "790 ms generating" in first
    assert "39.2 tokens/s" in first and "policy 812 ms" in first
    assert RAW_1.replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;") in first
    # Step 1's observation came back as the tool's answer; step 2 was sent it as a fourth message.
    assert "tool · read_file" in first and "return dict(l.split(" in first
    assert "request of 4 messages" in second and "return dict(l.split(" not in second
    assert "no tool call could be read from this reply" in second and "12 completion tokens" in second
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(2)&gt;" in second
    # A long observation is cut on the page, and says by how much.
    assert f"(first {MESSAGE_SHOWN} of {MESSAGE_SHOWN + 529} characters)" in second
    assert "submitted" in third  # the last step's result is shown too
    assert "No model output recorded for this step (hf policy)" in third  # absent facts, said plainly
    assert "443 prompt + " not in html and "412 prompt + 43 completion tokens, 790 ms generating" in html


def test_the_whole_request_of_a_step_is_exactly_the_chat_the_policy_saw(reviewer: User) -> None:
    trajectory = model_run()
    client = client_for(reviewer)
    body = client.get(f"/trajectories/{trajectory.trajectory_id}/transcript/3.json").json()
    steps = trajectory.steps.order_by("step")[:2]
    expected = conversation(
        trajectory.task.statement,  # type: ignore[union-attr]
        [RecordedStep(s.action_type, s.action_input, s.thought, s.observation) for s in steps],
    )
    assert body["messages"] == expected and len(body["messages"][-1]["content"]) > MESSAGE_SHOWN  # uncut
    assert client.get(f"/trajectories/{trajectory.trajectory_id}/transcript/9.json").status_code == 404


def test_a_scripted_run_has_a_transcript_without_model_facts(reviewer: User) -> None:
    trajectory = TrajectoryFactory.create()
    StepFactory.create(trajectory=trajectory, step=1)
    html = client_for(reviewer).get(f"/trajectories/{trajectory.trajectory_id}/transcript/").content.decode()
    assert "No model output recorded for this step (scripted policy)" in html
    assert "completion tokens" not in html


def test_two_tries_at_one_task_are_compared_side_by_side(reviewer: User) -> None:
    a = model_run()
    b = TrajectoryFactory.create(task=a.task, success=False, final_reward=0.0, patch="diff --git a/x b/x\n")
    StepFactory.create(trajectory=b, step=1, action_type="run_command", action_input="pytest -q", observation="B-ONLY")
    elsewhere = TrajectoryFactory.create()
    client = client_for(reviewer)

    picker = client.get(f"/trajectories/compare/?a={a.trajectory_id}").content.decode()
    assert f"?a={a.trajectory_id}&amp;b={b.trajectory_id}" in picker and str(elsewhere.trajectory_id) not in picker
    html = client.get(f"/trajectories/compare/?a={a.trajectory_id}&b={b.trajectory_id}").content.decode()
    left = html.split('id="compare-left"')[1].split('id="compare-right"')[0]
    right = html.split('id="compare-right"')[1]
    assert "412 prompt tokens" in left and "B-ONLY" not in left
    assert "B-ONLY" in right and '<span class="badge bad">failed</span>' in right

    other = client.get(f"/trajectories/compare/?a={a.trajectory_id}&b={elsewhere.trajectory_id}")
    assert other.status_code == 400 and "compare two tries at the same task" in other.content.decode()
    assert client.get("/trajectories/compare/").status_code == 400
    assert client.get("/trajectories/compare/?a=not-a-uuid").status_code == 404
    detail = client.get(f"/trajectories/{a.trajectory_id}/").content.decode()
    assert f'href="/trajectories/{a.trajectory_id}/transcript/"' in detail
    assert f'href="/trajectories/compare/?a={a.trajectory_id}"' in detail


def test_a_long_run_is_paged_and_each_page_knows_the_chat_before_it(
    reviewer: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trajectories.transcript

    monkeypatch.setattr(trajectories.transcript, "STEP_PAGE", 2)
    trajectory = model_run()
    client = client_for(reviewer)
    second = client.get(f"/trajectories/{trajectory.trajectory_id}/transcript/?page=2").content.decode()
    assert second.count('<li class="turn"') == 1 and 'id="turn-3"' in second
    assert "request of 6 messages" in second and "steps page 2 of 2" in second
    assert "412 prompt + 43 completion tokens" in second  # totals over the whole run, on every page
    assert 'id="turn-1"' in client.get(f"/trajectories/{trajectory.trajectory_id}/transcript/?page=0").content.decode()
