"""GRPO agent episodes on the rollout fleet: a Celery rollouts worker runs them against the served policy.

The policy is the tiny model taught to open an episode with `submit` about half the time and with a
command the other half, so the reward service's verdicts differ within a group (an empty submitted
patch scores 0; a command run to max_steps costs the early-termination penalty) and GRPO has
something to compare. Everything else is the real thing: the trainer's policy server, rollout
batches run by a separate worker process, the reward service scoring them, TRL's loss on the
sampled tokens.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import start_worker
from tests.training.trainer_support import (
    COMMAND,
    DEMO,
    SUBMIT,
    grpo_rows,
    make_mixed_policy,
    make_tiny_model,
    of,
    run_config,
    write_jsonl,
)
from training.trainers.policy_server import PolicyServer, policy_version
from trajectories.conversation import TOOLS, prompt_messages
from trajectories.models import RolloutBatch, Trajectory
from trajectories.schema import MODEL_CALL


@pytest.fixture(scope="module")
def mixed_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_mixed_policy(tmp_path_factory.mktemp("mixed-policy"))


@pytest.fixture
def fleet_workers(transactional_db: None) -> Iterator[None]:
    """A rollouts worker and a rewards worker, separate processes on the test database."""
    rollouts = start_worker("rollouts", name="fleet-rollouts@%h")
    rewards = start_worker("rewards", name="fleet-rewards@%h")
    next(rollouts), next(rewards)
    yield
    for worker in (rollouts, rewards):
        next(worker, None)


def test_the_policy_server_answers_as_an_openai_server_with_what_it_sampled_and_its_version(
    mixed_policy: Path,
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(mixed_policy)
    server = PolicyServer(model, AutoTokenizer.from_pretrained(mixed_policy)).start()
    try:
        assert httpx.get(f"{server.base_url}/v1/models").json()["data"][0]["id"] == server.name
        body = {
            "model": server.name,
            "messages": prompt_messages((DEMO / "tasks" / "task_0001" / "task.md").read_text()),
            "tools": TOOLS,
            "max_tokens": 40,
            "seed": 7,
        }
        first = httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=60).json()
        choice = first["choices"][0]
        assert choice["message"]["content"] in (SUBMIT, COMMAND)
        assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) == first["usage"]["completion_tokens"]
        assert all(entry["logprob"] <= 0 for entry in choice["logprobs"]["content"])
        assert policy_version(first["system_fingerprint"]) == 0
        # The same seed, the same sample; a sync names the step whose weights answer from then on.
        again = httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=60).json()
        assert again["choices"][0]["token_ids"] == choice["token_ids"]
        server.sync(model, 3)
        synced = httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=60).json()
        assert policy_version(synced["system_fingerprint"]) == 3
        for bad in ({**body, "model": "gpt-4"}, {**body, "messages": []}, {**body, "max_tokens": 10**9}, [1, 2]):
            refused = httpx.post(f"{server.base_url}/v1/chat/completions", json=bad, timeout=60)
            assert refused.status_code == 400 and refused.json()["error"]["message"]
    finally:
        server.close()


def _poison_in_process_rollouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trainer (this process) must not run an episode itself: every way in here fails loudly."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an episode ran in the trainer's process")

    monkeypatch.setattr("trajectories.runner.run_trajectory", refuse)
    monkeypatch.setattr("trajectories.agent.run_episode", refuse)
    monkeypatch.setattr("training.trainers.grpo_env.CrucibleEnv.reset", refuse)


@pytest.mark.usefixtures("demo_suite", "fleet_workers")
def test_grpo_agent_episodes_run_on_the_rollouts_worker_against_the_served_policy(
    mixed_policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.training.trainer_support import train_in_process

    _poison_in_process_rollouts(monkeypatch)
    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows(("task_0001",)) * 2)
    run_config(
        tmp_path / "run",
        "grpo",
        mixed_policy,
        data,
        # Two steps of one group of four; the served copy may lag one step, so step 2 is not synced.
        {"num_generations": 4, "batch_size": 4, "max_steps": 2, "max_new_tokens": 48, "max_staleness": 1},
        environment={"mode": "agent", "episodes": "fleet", "max_steps": 2},
    )
    code, events = train_in_process(tmp_path / "run")
    assert code == 0, events[-1]

    rollouts = of(events, "rollout")
    assert len(rollouts) == 8 and all(r["episodes"] == "fleet" and not r["dropped"] for r in rollouts)
    stored = {str(t.trajectory_id): t for t in Trajectory.objects.filter(batch__isnull=False).select_related("batch")}
    groups: dict[tuple[int, str], list[float]] = defaultdict(list)
    for rollout in rollouts:
        trajectory = stored[rollout["trajectory_id"]]
        batch: RolloutBatch = trajectory.batch  # type: ignore[assignment]
        # An ordinary rollout of the openai policy against the trainer's server, scored by the reward service.
        assert batch.policy_kind == "openai" and batch.base_url.startswith("http://127.0.0.1:")
        assert trajectory.status == Trajectory.Status.FINISHED and trajectory.attempt == 1
        assert trajectory.scored_at is not None and rollout["reward"] == trajectory.final_reward
        versions = {policy_version(s.extra[MODEL_CALL].get("system_fingerprint")) for s in trajectory.steps.all()}
        assert versions == {rollout["policy_version"]}
        assert rollout["staleness"] == rollout["step"] - 1 - rollout["policy_version"] <= 1
        groups[(batch.pk, trajectory.task_ref)].append(float(trajectory.final_reward))  # type: ignore[arg-type]
    # Step 1 waited for its episodes (v0); step 2's were started one generation ahead, while step 1
    # trained, by the same copy: one update stale, within the bound.
    assert sorted(r["staleness"] for r in rollouts) == [0] * 4 + [1] * 4
    first, ahead = RolloutBatch.objects.order_by("pk")
    scored = [t.scored_at for t in first.trajectories.all() if t.scored_at is not None]
    assert ahead.created_at < max(scored)
    assert len(groups) == 2 and any(len(set(rewards)) > 1 for rewards in groups.values()), groups
    metrics = [e["values"] for e in of(events, "metric") if "staleness_max" in e["values"]]
    assert [m["staleness_max"] for m in metrics] == [0.0, 1.0]
    assert any(m["reward_std"] > 0 for m in metrics)
    assert of(events, "checkpoint")


def test_a_fleet_run_that_names_a_task_crucible_does_not_have_fails_clearly(
    mixed_policy: Path, tmp_path: Path, transactional_db: None
) -> None:
    from tests.training.trainer_support import train_in_process

    rows = grpo_rows(("task_0001",))  # the task directory exists, but no suite holds the task
    data = write_jsonl(tmp_path / "prompts.jsonl", rows * 2)
    run_config(
        tmp_path / "run",
        "grpo",
        mixed_policy,
        data,
        {"num_generations": 2, "batch_size": 2, "max_new_tokens": 16},
        environment={"mode": "agent", "episodes": "fleet", "max_steps": 2},
    )
    code, events = train_in_process(tmp_path / "run")
    assert code != 0 and events[-1]["status"] == "failed"
    assert "task 'task_0001' in Crucible's tasks" in events[-1]["error"]
    assert not RolloutBatch.objects.exists()


def test_an_episode_written_by_unknown_weights_or_too_stale_is_left_out_of_the_loss(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from training.trainers.common import TrainerConfig
    from training.trainers.grpo_fleet import Fleet

    tiny = make_tiny_model(tmp_path / "tiny")
    config = TrainerConfig("grpo", tiny, tiny / "config.json", tmp_path / "out", max_staleness=1)
    fleet = Fleet(config, AutoTokenizer.from_pretrained(tiny))

    def record(*fingerprints: str | None) -> dict[str, Any]:
        steps = [{MODEL_CALL: {"system_fingerprint": f} if f else {}} for f in fingerprints]
        return {"trajectory_id": "t", "task_id": "task_0001", "final_reward": 1.0, "steps": steps}

    tokens = {"prompt_ids": [1, 2], "response_ids": [3, 4, 5], "loss_mask": [1, 0, 1], "logprobs": [-0.1, None, -0.2]}
    kept = fleet._sample(record("crucible-policy-v4", "crucible-policy-v5"), tokens, step=5)
    assert (kept.dropped, kept.version, kept.staleness, kept.reward) == ("", 4, 1, 1.0)
    assert fleet._sample(record("crucible-policy-v3"), tokens, step=5).dropped == "staler than rl.max_staleness"
    assert fleet._sample(record("crucible-policy-v5", None), tokens, step=5).dropped == "written by unknown weights"
    assert fleet._sample(record("gpt-4-0613"), tokens, step=5).dropped == "written by unknown weights"
    # The whole episode's budget (rl.max_new_tokens) cuts the completion, and says so.
    config.max_new_tokens = 2
    cut = fleet._sample(record("crucible-policy-v5"), tokens, step=5)
    assert cut.truncated and cut.completion_ids == [3, 4] and cut.env_mask == [1, 0]
    assert json.dumps(cut.logprobs) == "[-0.1, null]"


def test_one_generation_ahead_starts_the_next_steps_episodes_before_it_waits(tmp_path: Path) -> None:
    from training.trainers.common import TrainerConfig
    from training.trainers.grpo_fleet import Dispatch, Fleet

    tiny = make_tiny_model(tmp_path / "tiny")
    fleet = Fleet(TrainerConfig("grpo", tiny, tiny / "config.json", tmp_path / "out", max_staleness=1), None)
    calls: list[tuple[Any, ...]] = []

    def dispatch(task_ids: list[str], step: int, ahead: bool = False) -> Dispatch:
        calls.append(("dispatch", step, ahead, tuple(task_ids)))
        return Dispatch({i: i for i in range(len(task_ids))}, task_ids, [step * 10 + ahead])

    def collect(dispatch: Dispatch, step: int) -> list[Any]:
        calls.append(("collect", dispatch.batches, step))
        return []

    def cancel(dispatch: Dispatch) -> None:
        calls.append(("cancel", dispatch.batches))

    fleet._dispatch = dispatch  # type: ignore[method-assign]
    fleet._sync = lambda model, step, learned_at: calls.append(("sync", step, learned_at))  # type: ignore[method-assign]
    fleet._collect = collect  # type: ignore[method-assign]
    fleet._cancel = cancel  # type: ignore[method-assign]

    fleet._ahead(None, ["a", "a"], 0, 3)  # the first step: its own episodes, and the next step's
    assert calls == [
        ("sync", 0, 0),
        ("dispatch", 0, False, ("a", "a")),
        ("sync", 0, 1),
        ("dispatch", 0, True, ("a", "a")),
        ("collect", [0], 0),
    ]
    calls.clear()
    fleet._ahead(None, ["b", "b"], 1, 3)  # learns from what ran while step 0 trained; starts step 2's
    assert calls == [("sync", 1, 2), ("dispatch", 1, True, ("b", "b")), ("collect", [1], 1)]
    calls.clear()
    fleet._ahead(None, ["c", "c"], 2, 3)  # the last step starts nothing for a step that will not come
    assert calls == [("collect", [11], 2)] and fleet.pending is None
    calls.clear()
    fleet.pending = Dispatch({0: 0}, ["x"], [99])  # a generation of another size cannot stand in: cancelled
    fleet._ahead(None, ["d", "d"], 2, 3)
    assert calls[0] == ("cancel", [99]) and ("dispatch", 2, False, ("d", "d")) in calls
