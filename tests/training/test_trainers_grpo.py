"""GRPO with Crucible's verified reward: single-turn patches, and agent episodes in the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.training.trainer_support import (
    DEMO,
    grpo_rows,
    make_tiny_model,
    of,
    run_config,
    train_in_process,
    write_jsonl,
)
from training.trainers.grpo_env import (
    CrucibleEnv,
    Scorer,
    completion_steps,
    extract_patch,
    single_turn_prompt,
    tool_call_validity,
)
from trajectories.policies.scripted import ScriptedPolicy


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="module")
def scorer() -> Scorer:
    return Scorer()


def test_the_environment_runs_the_agent_tools_in_a_sandbox_and_scores_the_diff(scorer: Scorer) -> None:
    CrucibleEnv.scorer = scorer
    env = CrucibleEnv()
    task_dir = DEMO / "tasks" / "task_0001"
    assert env.reset(prompt=[], task_id="task_0001", task_dir=str(task_dir)) is None
    source = env.read_file("configkit/config.py")
    assert "def parse_config" in source
    assert env.read_file("../../etc/passwd").startswith("error:")
    assert "configkit/config.py" in env.search_symbol("parse_config")
    # The oracle's fix, made through the tools the model is offered (the same names and arguments).
    oracle = ScriptedPolicy(task_dir / "repo_snapshot", (task_dir / "expected_patch").read_text())
    for _thought, call in oracle.plan:
        if call.name != "submit":
            assert not getattr(env, call.name)(**call.arguments).startswith("error:")
    assert env.submit() == "submitted"
    assert env.read_file("configkit/config.py").startswith("error: already submitted")
    patch, score = env._finish()
    assert score is not None and score.resolved and score.reward == 1.0
    assert "configkit/config.py" in patch
    assert env.box is None  # the sandbox is gone once the episode is scored


def test_an_agent_that_stops_without_submitting_is_penalised(scorer: Scorer) -> None:
    CrucibleEnv.scorer = scorer
    env = CrucibleEnv()
    env.reset(task_id="task_0001", task_dir=str(DEMO / "tasks" / "task_0001"))
    patch, score = env._finish()
    assert patch == "" and score is not None
    assert score.reward < 0 and "early_termination" in score.breakdown


def test_single_turn_prompts_show_the_statement_and_the_files_the_task_is_about() -> None:
    task_dir = DEMO / "tasks" / "task_0001"
    system, user = single_turn_prompt("parse_config('') crashes", str(task_dir))
    assert "unified diff" in system["content"]
    assert user["content"].startswith("parse_config('') crashes")
    assert "File configkit/config.py:" in user["content"] and "def parse_config" in user["content"]


def test_a_patch_is_read_out_of_a_fenced_reply() -> None:
    reply = "Here is the fix:\n```diff\ndiff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n```\n"
    assert extract_patch(reply) == "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert extract_patch("no diff here") == ""


def test_tool_call_validity_counts_assistant_turns_that_call_a_known_tool() -> None:
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read_file", "arguments": {}}}]},
        {"role": "tool", "content": "..."},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "rm_rf", "arguments": {}}}]},
        {"role": "tool", "content": "..."},
        {"role": "assistant", "content": "I give up"},
    ]
    assert tool_call_validity(completion) == (1, 3)
    steps = completion_steps(completion)
    assert [s["action_type"] for s in steps] == ["read_file", "invalid", "invalid"]
    assert steps[0]["observation"] == "..." and steps[2]["action_input"] == "I give up"


def test_grpo_single_turn_scores_every_generation_with_the_verified_reward(tiny: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows())
    run_config(
        tmp_path / "run",
        "grpo",
        tiny,
        data,
        {"num_generations": 2, "max_new_tokens": 16, "kl_coef": 0.05},
        environment={"mode": "single_turn"},
    )
    code, events = train_in_process(tmp_path / "run")
    assert code == 0, events[-1]
    rollouts = of(events, "rollout")
    assert len(rollouts) == 2
    for rollout in rollouts:
        assert rollout["task_id"] == "task_0001"
        # A reply with no diff is the empty patch: it scores 0 under the hidden tests, it is not skipped.
        assert rollout["reward"] == 0.0 and rollout["breakdown"]["tests"]
        assert rollout["completion"]
    values = of(events, "metric")[0]["values"]
    assert values["reward_mean"] == 0.0 and "reward_std" in values and "kl" in values
    (checkpoint,) = of(events, "checkpoint")
    model = AutoModelForCausalLM.from_pretrained(checkpoint["path"])
    assert model.generate(**model.dummy_inputs, max_new_tokens=2, do_sample=False).shape[1] > 1


def test_grpo_agent_mode_runs_episodes_through_the_environment(tiny: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows())
    run_config(
        tmp_path / "run",
        "grpo",
        tiny,
        data,
        {"num_generations": 2, "max_new_tokens": 16},
        environment={"mode": "agent", "max_steps": 2},
    )
    code, events = train_in_process(tmp_path / "run")
    assert code == 0, events[-1]
    rollouts = of(events, "rollout")
    assert len(rollouts) == 2
    # An untrained model never submits: each episode ends as max_steps, with the penalty.
    assert all(r["breakdown"].get("early_termination") for r in rollouts)
    assert all(r["mode"] == "agent" and r["steps"] for r in rollouts)
    values = of(events, "metric")[0]["values"]
    assert values["tool_call_validity"] == 0.0
    assert "tools_call_frequency" in values
    assert of(events, "checkpoint")


def test_a_step_needs_as_many_prompts_as_its_groups_or_the_run_fails_clearly(tiny: Path, tmp_path: Path) -> None:
    # One prompt, two groups a step: TRL's sampler would yield nothing and the run end at step 0, "succeeded".
    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows())
    run_config(tmp_path / "run", "grpo", tiny, data, {"num_generations": 2, "batch_size": 4})
    code, events = train_in_process(tmp_path / "run")
    assert code != 0 and "each step needs 2 prompts" in events[-1]["error"]
    assert not of(events, "checkpoint")
