"""The launcher runs a trainer that speaks the protocol and turns what it says into rows and live events."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from core.vocabulary import RunStatus
from tests.helpers import running_run
from tests.training.runs import config, read_config, verified_set
from training.launcher import LOG_TAIL_LINES, RunFollower, execute, trainer_command
from training.models import TrainingRun
from training.services import create_run, live_group
from trajectories.models import Trajectory


def _head() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=settings.BASE_DIR, capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or "unknown"


def _receive_all(channel: str, limit: int = 50) -> list[dict[str, Any]]:
    layer = get_channel_layer()
    assert layer is not None

    async def drain() -> list[dict[str, Any]]:
        events = []
        for _ in range(limit):
            try:
                message = await asyncio.wait_for(layer.receive(channel), timeout=1.5)
            except TimeoutError:
                break
            events.append(message["event"])
        return events

    return async_to_sync(drain)()


@pytest.mark.django_db(transaction=True)
def test_a_run_records_metrics_checkpoints_with_lineage_and_publishes_them_live(
    fake_trainer: Callable[..., None],
) -> None:
    training_set = verified_set()
    run = create_run(config("sft"), enqueue=False)
    layer = get_channel_layer()
    assert layer is not None
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(live_group(run), channel)

    finished = execute(run.pk)

    assert finished is not None and finished.status == RunStatus.SUCCEEDED, finished and finished.log_tail
    train = Path(run.output_dir).parent / "train.jsonl"
    rows = [json.loads(line) for line in train.read_text().splitlines()]
    assert len(rows) == 2  # the two verified successes; rejection sampling drops the failures
    assert all(r["messages"][0]["role"] == "system" and r["tools"] for r in rows)
    assert all(any(m.get("tool_calls") for m in r["messages"]) for r in rows)
    trainer_config = read_config(run)
    assert trainer_config["data"]["train_file"] == str(train) and trainer_config["output_dir"] == run.output_dir
    assert trainer_config["kind"] == "sft" and trainer_config["rl"]["max_steps"] == 3

    assert list(finished.metric_rows.values_list("step", flat=True)) == [1, 2, 3]
    assert finished.metrics["loss"] == pytest.approx(2 / 3) and "steps_per_min" in finished.metrics
    checkpoints = list(finished.checkpoints.order_by("step"))
    assert [c.step for c in checkpoints] == [2, 3]
    last = checkpoints[-1]
    assert last.config_hash == run.config_hash and len(last.config_hash) == 64
    assert last.dataset == str(training_set) == "oracle@1"
    assert last.dataset_hash == hashlib.sha256(train.read_bytes()).hexdigest() == finished.dataset_hash
    assert last.code_version == _head() and last.metrics["loss"] == pytest.approx(2 / 3)
    assert last.base_model == str(Path(settings.CRUCIBLE_DEFAULT_MODEL).resolve()) and last.parent is None
    assert "fake trainer for a sft run" in finished.log_tail and finished.pgid is None

    events = _receive_all(channel)
    assert [e["step"] for e in events if e["kind"] == "metric"] == [1, 2, 3]
    assert [e["step"] for e in events if e["kind"] == "checkpoint"] == [2, 3]
    assert [e["status"] for e in events if e["kind"] == "status"] == ["running", "succeeded"]


@pytest.mark.django_db
def test_a_failed_trainer_fails_the_run_with_its_log_tail(fake_trainer: Callable[..., None]) -> None:
    verified_set()
    fake_trainer("fail")
    run = create_run(config("sft"), enqueue=False)
    finished = execute(run.pk)
    assert finished is not None and finished.status == RunStatus.FAILED
    assert finished.error.startswith("trainer exited with code 3: RuntimeError: the fake trainer was told to fail")
    lines = finished.log_tail.splitlines()
    assert len(lines) == LOG_TAIL_LINES and lines[-1].startswith("RuntimeError")
    assert execute(run.pk) is None  # a second delivery does not run a finished run again


@pytest.mark.django_db
def test_preference_rows_pair_a_better_verified_outcome_with_a_worse_one(fake_trainer: Callable[..., None]) -> None:
    verified_set()
    run = create_run(config("dpo"), enqueue=False)
    rows = [json.loads(line) for line in (Path(run.output_dir).parent / "train.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in rows} == {"task_a", "task_b"}
    for row in rows:
        assert row["chosen_reward"] > row["rejected_reward"]
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["chosen"][0]["role"] == "assistant" and row["rejected"][0]["role"] == "assistant"


@pytest.mark.django_db
def test_grpo_prompts_come_with_task_directories_a_scorer_reads(
    demo_suite: Any, fake_trainer: Callable[..., None]
) -> None:
    from tests.training.helpers import record_score
    from training.curation import CurationRule, build_training_set

    for trajectory in Trajectory.objects.filter(task__isnull=False)[:2]:
        record_score(trajectory, 1.0, True)
    build_training_set("oracle", CurationRule())
    run = create_run(config("grpo", rl={"num_generations": 2}), enqueue=False)
    rows = [json.loads(line) for line in (Path(run.output_dir).parent / "train.jsonl").read_text().splitlines()]
    assert rows
    for row in rows:
        task_dir = Path(row["task_dir"])
        meta = json.loads((task_dir / "metadata.json").read_text())
        assert (
            meta["task_id"] == row["task_id"]
            and (task_dir / "repo_snapshot").is_dir()
            and (task_dir / "tests").is_dir()
        )
        assert row["prompt"][1]["content"] == (task_dir / "task.md").read_text()


@pytest.mark.django_db
def test_rollout_events_become_trajectories_of_the_run_and_junk_is_log(fake_trainer: Callable[..., None]) -> None:
    verified_set()
    run = create_run(config("sft"), enqueue=False)  # the follower does not care which kind speaks
    follower = RunFollower(TrainingRun.objects.get(pk=run.pk), running_run(run))
    follower.line(
        "out",
        json.dumps({"event": "rollout", "task_id": "task_a", "completion": "<x>", "patch": "diff", "reward": 0.5}),
    )
    agent_steps = [
        {"action_type": "read_file", "action_input": {"path": "a.py"}, "observation": "x = 1"},
        {"action_type": "invalid", "action_input": "<tool_call>oops", "observation": "format error"},
    ]
    agent = {
        "event": "rollout",
        "task_id": "task_b",
        "mode": "agent",
        "steps": agent_steps,
        "reward": 1.0,
        "resolved": True,
    }
    follower.line("out", json.dumps(agent))
    follower.line("out", '{"event": "metric", "values": "not a mapping"')
    follower.line("out", json.dumps({"event": "checkpoint", "step": 1, "path": "relative/dir"}))
    follower.line("err", "plain log")
    rollout = Trajectory.objects.get(extra__training_run=run.pk, task_ref="task_a")
    assert rollout.final_reward == 0.5 and rollout.patch == "diff" and rollout.success is None
    stored = Trajectory.objects.get(extra__training_run=run.pk, task_ref="task_b")
    assert stored.success is True and stored.step_count == 2 and stored.extra["mode"] == "agent"
    assert list(stored.steps.values_list("action_type", "observation")) == [
        ("read_file", "x = 1"),
        ("invalid", "format error"),
    ]
    assert rollout.scored_spec == ""  # not verified: the reward service has not scored it
    assert "ignored a malformed checkpoint event" in follower.log_tail() and "plain log" in follower.log_tail()
    assert not run.checkpoints.exists()


@pytest.mark.django_db
def test_rollouts_go_through_the_import_writer_and_stop_when_the_run_is_not_ours() -> None:
    verified_set()
    run = create_run(config("sft"), enqueue=False)  # the follower does not care which kind speaks
    follower = RunFollower(TrainingRun.objects.get(pk=run.pk), running_run(run))
    secret = "token ghp_" + "a1B2c3D4e5" * 4
    leaky = {
        "event": "rollout",
        "task_id": "task_a",
        "completion": f"here is {secret}",
        "steps": [{"action_type": "run_command", "action_input": {"command": "env"}, "observation": secret}],
        "reward": 1.0,
        "flags": ["test_modification"],
    }
    follower.line("out", json.dumps(leaky))
    stored = Trajectory.objects.get(extra__training_run=run.pk)
    assert "ghp_a1B2" not in json.dumps(stored.extra) and "ghp_a1B2" not in stored.steps.get().observation
    assert stored.redacted_with and stored.duplicate_rate is not None  # what an import writes
    assert stored.claimed == {"final_reward": 1.0, "success": None, "flags": ["test_modification"]}
    assert stored.final_reward == 1.0 and stored.scored_spec == ""

    follower.line("out", json.dumps({**leaky, "task_id": "t" * 500}))  # refused as an import would refuse it
    assert "ignored a malformed rollout event" in follower.log_tail() and "task_id" in follower.log_tail()

    TrainingRun.objects.filter(pk=run.pk).update(attempt=2)  # the run was taken over: this launcher is stale
    follower.line("out", json.dumps({**leaky, "task_id": "task_b"}))
    assert Trajectory.objects.filter(extra__training_run=run.pk).count() == 1


@pytest.mark.django_db
def test_a_fleet_episode_is_linked_to_the_run_not_copied() -> None:
    from tests.factories import TrajectoryFactory
    from trajectories.models import RolloutBatch

    verified_set()
    run = create_run(config("sft"), enqueue=False)
    follower = RunFollower(TrainingRun.objects.get(pk=run.pk), running_run(run))
    episode = TrajectoryFactory.create(source=Trajectory.Source.ONLINE, extra={"kept": 1})
    assert episode.suite is not None
    episode.batch = RolloutBatch.objects.create(suite=episode.suite, policy_kind="openai")
    episode.save()
    imported = TrajectoryFactory.create()  # not a rollout of a batch: no fleet episode
    before = Trajectory.objects.count()
    event = {
        "event": "rollout",
        "episodes": "fleet",
        "trajectory_id": str(episode.trajectory_id),
        "step": 3,
        "policy_version": 2,
        "staleness": 1,
        "truncated": False,
        "dropped": "",
        "reward": 0.0,
    }
    follower.line("out", json.dumps(event))
    follower.line("out", json.dumps({**event, "trajectory_id": str(imported.trajectory_id)}))
    follower.line("out", json.dumps({**event, "trajectory_id": "not a uuid"}))
    follower.line("out", json.dumps({**event, "step": 9, "staleness": "'; drop table"}))  # linked once only
    assert Trajectory.objects.count() == before
    episode.refresh_from_db()
    assert episode.extra == {
        "kept": 1,
        "training_run": run.pk,
        "step": 3,
        "mode": "agent",
        "episodes": "fleet",
        "policy_version": 2,
        "staleness": 1,
        "truncated": False,
        "dropped": "",
    }
    imported.refresh_from_db()
    assert "training_run" not in imported.extra
    assert list(Trajectory.objects.filter(extra__training_run=run.pk)) == [episode]


def test_the_trainer_runs_under_accelerate_with_one_process_or_a_given_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRUCIBLE_TRAINING_LAUNCHER", raising=False)
    monkeypatch.delenv("CRUCIBLE_ACCELERATE_CONFIG", raising=False)
    command = trainer_command(Path("/runs/7"))
    assert command[1:3] == ["-m", "accelerate.commands.launch"] and command[-3:] == [
        "-m",
        "training.trainers",
        "/runs/7",
    ]
    assert "--num_processes" in command and "--cpu" in command  # this host has no GPU
    monkeypatch.setenv("CRUCIBLE_ACCELERATE_CONFIG", "/etc/crucible/accelerate.yaml")
    command = trainer_command(Path("/runs/7"))
    assert command[3:5] == ["--config_file", "/etc/crucible/accelerate.yaml"] and "--cpu" not in command


def test_the_trainer_scores_with_the_reward_services_probe_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GRPO run scores its rollouts in-process; keyed by chance, its probes and changed values
    would differ from the reward service's, and the same patch could get two verdicts."""
    from rewards.services import probe_secret as service_key
    from training.launcher import trainer_environment
    from training.trainers import grpo_env

    for name, value in trainer_environment().items():
        monkeypatch.setenv(name, value)
    assert grpo_env.probe_secret() == service_key()
    monkeypatch.delenv("CRUCIBLE_PROBE_SECRET")
    assert grpo_env.probe_secret() != service_key()  # by hand, without the launcher: a key of its own
