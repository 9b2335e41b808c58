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

from core.vocabulary import RunStatus
from tests.conftest import start_worker
from tests.training.trainer_support import (
    COMMAND,
    DEMO,
    SUBMIT,
    grpo_rows,
    make_mixed_policy,
    make_tiny_model,
    run_config,
    write_jsonl,
)
from training.models import TrainingRun
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


def _fleet_run(model: Path, rl: dict[str, Any]) -> TrainingRun:
    """A GRPO fleet run of `model` on task_0001, created as a researcher would (needs demo_suite)."""
    from tests.training.helpers import record_score
    from tests.training.runs import config
    from training.curation import CurationRule, build_training_set
    from training.services import create_run

    for trajectory in Trajectory.objects.filter(task__task_id="task_0001")[:2]:
        record_score(trajectory, 1.0, True)
    build_training_set("oracle", CurationRule())
    raw = config(
        "grpo",
        model={"base_model": str(model)},
        rl={"learning_rate": 1e-3, **rl},
        environment={"mode": "agent", "episodes": "fleet", "max_steps": 2},
        logging={"save_every_steps": rl["max_steps"]},
    )
    return create_run(raw, enqueue=False)


@pytest.mark.usefixtures("demo_suite", "fleet_workers")
def test_grpo_agent_episodes_run_on_the_rollouts_worker_against_the_served_policy(mixed_policy: Path) -> None:
    from training.launcher import execute

    # Two steps of one group of four; the served copy may lag one step, so the fleet runs one ahead.
    run = _fleet_run(
        mixed_policy, {"num_generations": 4, "batch_size": 4, "max_steps": 2, "max_new_tokens": 48, "max_staleness": 1}
    )
    finished = execute(run.pk)  # as the training worker runs it: the trainer is a process of its own
    assert finished is not None and finished.status == RunStatus.SUCCEEDED, finished and finished.log_tail

    episodes = list(Trajectory.objects.filter(extra__training_run=run.pk).select_related("batch"))
    assert len(episodes) == 8 and all(e.extra["episodes"] == "fleet" and not e.extra["dropped"] for e in episodes)
    groups: dict[int, list[float]] = defaultdict(list)
    for episode in episodes:
        batch = episode.batch
        assert batch is not None
        # An ordinary rollout of the openai policy against the trainer's server, scored by the reward service.
        assert batch.policy_kind == "openai" and batch.base_url.startswith("http://127.0.0.1:")
        assert episode.status == Trajectory.Status.FINISHED and episode.attempt == 1
        assert episode.scored_at is not None and episode.final_reward is not None
        versions = {policy_version(s.extra[MODEL_CALL].get("system_fingerprint")) for s in episode.steps.all()}
        assert versions == {episode.extra["policy_version"]}
        assert episode.extra["staleness"] == episode.extra["step"] - 1 - episode.extra["policy_version"] <= 1
        groups[batch.pk].append(episode.final_reward)
    # Step 1 waited for its episodes (v0); step 2's were started one generation ahead, while step 1
    # trained, by the same copy: one update stale, within the bound.
    assert sorted(e.extra["staleness"] for e in episodes) == [0] * 4 + [1] * 4
    first, ahead = RolloutBatch.objects.order_by("pk")
    scored = [t.scored_at for t in first.trajectories.all() if t.scored_at is not None]
    assert ahead.created_at < max(scored)
    assert len(groups) == 2 and any(len(set(rewards)) > 1 for rewards in groups.values()), groups
    metrics = list(finished.metric_rows.values_list("values", flat=True))
    assert [m["staleness_max"] for m in metrics if "staleness_max" in m] == [0.0, 1.0]
    assert any(m.get("reward_std", 0) > 0 for m in metrics)
    assert finished.checkpoints.exists()


@pytest.mark.usefixtures("demo_suite")
def test_a_fleet_request_for_a_task_crucible_does_not_have_is_answered_with_the_error(
    tmp_path: Path, transactional_db: None
) -> None:
    from training import fleet_episodes

    settings: dict[str, Any] = {"base_url": "http://127.0.0.1:9", "model": "crucible-policy", "max_steps": 2, "seed": 1}
    event: dict[str, Any] = {"request": 3, "tasks": [["task_0001", 2], ["no-such-task", 2]], "settings": settings}
    assert fleet_episodes.start(tmp_path, event) is None
    answer = json.loads((tmp_path / "3.json").read_text())
    assert "task 'no-such-task' in Crucible's tasks" in answer["error"]
    assert not RolloutBatch.objects.exists()  # every task is checked before any batch starts
    for bad in (
        {**event, "tasks": []},
        {**event, "settings": {**settings, "temperature": 99}},
        {**event, "tasks": [["task_0001", 2]], "settings": {**settings, "base_url": "http://10.1.2.3:80"}},
    ):
        assert fleet_episodes.start(tmp_path, {**bad, "request": 4}) is None
        assert json.loads((tmp_path / "4.json").read_text())["error"]
    assert not RolloutBatch.objects.exclude(status="cancelled").exists()


def test_fleet_episodes_run_only_under_the_launcher(mixed_policy: Path, tmp_path: Path) -> None:
    from tests.training.trainer_support import train_in_process

    data = write_jsonl(tmp_path / "prompts.jsonl", grpo_rows(("task_0001",)) * 2)
    run_config(
        tmp_path / "run",
        "grpo",
        mixed_policy,
        data,
        {"num_generations": 2, "batch_size": 2, "max_new_tokens": 16},
        environment={"mode": "agent", "episodes": "fleet", "max_steps": 2},
    )
    code, events = train_in_process(tmp_path / "run")  # by hand: no launcher to start the episodes
    assert code != 0 and "needs Crucible's launcher" in events[-1]["error"]


def test_an_episode_written_by_unknown_weights_or_too_stale_is_left_out_of_the_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoTokenizer

    from training.trainers.common import TrainerConfig
    from training.trainers.grpo_fleet import Fleet

    monkeypatch.setenv("CRUCIBLE_FLEET_DIR", str(tmp_path / "fleet"))
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


def test_one_generation_ahead_starts_the_next_steps_episodes_before_it_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from training.trainers.common import TrainerConfig
    from training.trainers.grpo_fleet import Dispatch, Fleet

    monkeypatch.setenv("CRUCIBLE_FLEET_DIR", str(tmp_path / "fleet"))
    tiny = make_tiny_model(tmp_path / "tiny")
    fleet = Fleet(TrainerConfig("grpo", tiny, tiny / "config.json", tmp_path / "out", max_staleness=1), None)
    calls: list[tuple[Any, ...]] = []

    def dispatch(task_ids: list[str], step: int, ahead: bool = False) -> Dispatch:
        calls.append(("dispatch", step, ahead, tuple(task_ids)))
        return Dispatch(step * 10 + ahead, task_ids)

    def collect(dispatch: Dispatch, step: int) -> list[Any]:
        calls.append(("collect", dispatch.request, step))
        return []

    def cancel(dispatch: Dispatch) -> None:
        calls.append(("cancel", dispatch.request))

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
        ("collect", 0, 0),
    ]
    calls.clear()
    fleet._ahead(None, ["b", "b"], 1, 3)  # learns from what ran while step 0 trained; starts step 2's
    assert calls == [("sync", 1, 2), ("dispatch", 1, True, ("b", "b")), ("collect", 1, 1)]
    calls.clear()
    fleet._ahead(None, ["c", "c"], 2, 3)  # the last step starts nothing for a step that will not come
    assert calls == [("collect", 11, 2)] and fleet.pending is None
    calls.clear()
    fleet.pending = Dispatch(99, ["x"])  # a generation of another size cannot stand in: cancelled
    fleet._ahead(None, ["d", "d"], 2, 3)
    assert calls[0] == ("cancel", 99) and ("dispatch", 2, False, ("d", "d")) in calls
