"""The reward service inside Crucible: the rewards queue, stored rewards, the commands and page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from rewards.jobs import score_trajectory_job
from rewards.models import Reward, RewardSanity
from rewards.services import score_trajectory
from rewards.spec import load_spec, parse_spec
from sandbox import SandboxError
from sandbox.backends.local import ALLOW_ENV as LOCAL_ALLOW_ENV
from tasks.models import Task, TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from trajectories.batches import start_batch
from trajectories.models import Trajectory
from trajectories.replay import replay_trajectory
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory
from trajectories.services import import_trajectories

SCORE_KEYS = {"task_id", "reward", "resolved", "pass_rate", "tests", "flags", "breakdown"}


def demo_trajectory(task_id: str, success: bool) -> Trajectory:
    found = Trajectory.objects.filter(task__task_id=task_id, claimed__success=success).exclude(patch="").first()
    assert found is not None
    return found


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_rewards_worker_scores_a_trajectory_once_per_spec(demo_suite: TaskSuite, rewards_worker: object) -> None:
    trajectory = demo_trajectory("task_0001", True)
    Trajectory.objects.filter(pk=trajectory.pk).update(final_reward=None, success=None)
    first = score_trajectory_job.apply_async(args=[str(trajectory.trajectory_id)]).get(timeout=120)
    again = score_trajectory_job.apply_async(args=[str(trajectory.trajectory_id)]).get(timeout=120)
    assert first == again and first["reward"] == 1.0 and first["resolved"] is True
    assert Reward.objects.filter(trajectory=trajectory).count() == 1
    trajectory.refresh_from_db()
    assert trajectory.final_reward == 1.0 and trajectory.success is True
    assert all(s.reward_breakdown.get("spec") == first["spec_version"] for s in trajectory.steps.all())


@pytest.mark.django_db
def test_a_failed_trajectory_gets_its_outcome_and_process_rewards(demo_suite: TaskSuite) -> None:
    trajectory = demo_trajectory("task_0009", False)
    reward = score_trajectory(str(trajectory.trajectory_id))
    assert reward.reward < 1 and not reward.resolved
    assert reward.breakdown["early_termination"] == -0.1  # ended by max_steps
    assert any(p["breakdown"].get("repeated_command") for p in reward.process)
    assert any(f["detector"] == "repeated_final_test_runs" for f in reward.flags)


@pytest.mark.django_db
def test_score_patch_prints_the_json_contract_and_is_deterministic(
    demo_suite: TaskSuite, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = []
    for _ in range(2):
        call_command(
            "score_patch", "--task", "task_0002", "--patch", str(DEMO / "tasks/task_0002/expected_patch"), "--json"
        )
        outputs.append(json.loads(capsys.readouterr().out))
    result = outputs[0]
    assert SCORE_KEYS <= set(result) and result["reward"] == 1.0 and result["resolved"] is True
    assert result["tests"]["fail_to_pass"]["passed"] == result["tests"]["fail_to_pass"]["total"] > 0
    for output in outputs:
        output["breakdown"].pop("duration_ms")
    assert outputs[0] == outputs[1]


def test_score_patch_takes_a_task_directory_without_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.diff"
    empty.write_text("")
    call_command("score_patch", "--task", str(DEMO / "tasks/task_0003"), "--patch", str(empty), "--json")
    result = json.loads(capsys.readouterr().out)
    assert result["reward"] <= 0 and result["resolved"] is False


@pytest.mark.django_db
def test_score_patch_answers_bad_input_clearly(tmp_path: Path) -> None:
    binary = tmp_path / "bad.diff"
    binary.write_bytes(b"\xff\xfe\x00")
    spec = tmp_path / "spec.yaml"
    spec.write_text("outcome: {lambda_success: high}\n")
    good_task = str(DEMO / "tasks/task_0001")
    cases = [
        (["--task", "task_9999", "--patch", str(DEMO / "tasks/task_0001/expected_patch")], "no task 'task_9999'"),
        (["--task", good_task, "--patch", str(tmp_path / "missing.diff")], "no such file"),
        (["--task", good_task, "--patch", str(binary)], "not a UTF-8 text diff"),
        (
            ["--task", good_task, "--patch", str(DEMO / "tasks/task_0001/expected_patch"), "--spec", str(spec)],
            "outcome.lambda_success must be a number",
        ),
    ]
    for args, message in cases:
        with pytest.raises(CommandError, match=message):
            call_command("score_patch", *args)


@pytest.mark.django_db
def test_the_sanity_check_shows_the_reward_gap_on_the_suite_page(
    demo_suite: TaskSuite, reviewer_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("reward_sanity", "--task", "task_0013", verbosity=0)
    out = capsys.readouterr().out
    assert "task_0013: expected 1, empty 0" in out and "0 task(s) whose reward cannot tell them apart" in out
    row = RewardSanity.objects.get(task__task_id="task_0013")
    assert row.separates and row.gap > 0 and set(row.stubs) == {"return None", "pass", "constant"}
    # A task whose expected patch is no fix at all: its reward cannot tell it from empty.
    Task.objects.filter(task_id="task_0014").update(
        expected_patch=(DEMO / "tasks/task_0013/expected_patch").read_text()
    )
    call_command("reward_sanity", "--task", "task_0014", verbosity=0)
    assert "<- cannot tell good from bad" in capsys.readouterr().out
    html = reviewer_client.get("/tasks/demo/").content.decode()
    assert "cannot tell good from bad code on 1 task" in html and "task_0014</a>" in html


@pytest.mark.django_db
def test_scoring_and_replay_run_in_the_configured_sandbox_backend(
    demo_suite: TaskSuite, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = start_batch(TaskSuite.objects.get(name="demo"), RolloutSettings("scripted"), enqueue=False)
    rollout = run_trajectory(batch.trajectories.get(task_ref="task_0001").pk)
    assert rollout is not None and rollout.sandbox["backend"] == "bwrap"
    trajectory_id = str(rollout.trajectory_id)
    settings.CRUCIBLE_SANDBOX_BACKEND = "local"
    # The local backend refuses to run unless allowed: the refusal shows which backend was picked.
    monkeypatch.delenv(LOCAL_ALLOW_ENV, raising=False)
    with pytest.raises(SandboxError, match="local backend does not isolate"):
        score_trajectory(trajectory_id)
    with pytest.raises(SandboxError, match="local backend does not isolate"):
        replay_trajectory(trajectory_id)
    with pytest.raises(CommandError, match="local backend does not isolate"):
        call_command("score_patch", "--task", "task_0001", "--patch", str(DEMO / "tasks/task_0001/expected_patch"))
    monkeypatch.setenv(LOCAL_ALLOW_ENV, "1")
    assert score_trajectory(trajectory_id).reward == 1.0
    report = replay_trajectory(trajectory_id)
    # Not compared for reproducibility: the test runner's report path differs between backends.
    assert report.backend == "local" and report.steps == rollout.step_count


@pytest.mark.django_db
def test_a_finished_rollout_is_queued_for_scoring_once_its_row_is_committed(
    demo_suite: TaskSuite,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    queued: list[str] = []
    monkeypatch.setattr(score_trajectory_job, "delay", queued.append)
    batch = start_batch(TaskSuite.objects.get(name="demo"), RolloutSettings("scripted"), enqueue=False)
    pk = batch.trajectories.get(task_ref="task_0002").pk
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        rollout = run_trajectory(pk)
    assert rollout is not None and rollout.status == "finished"
    assert queued == []  # nothing reaches the queue before the commit
    for callback in callbacks:
        callback()
    assert queued == [str(rollout.trajectory_id)]


@pytest.mark.django_db
def test_a_flag_found_in_the_steps_meets_the_specs_policy_like_the_verdicts_own(tmp_path: Path) -> None:
    """`git_history_mining: zero` bounds a trajectory that mined the history, though its patch fixes the bug."""
    import_task_dirs(DEMO / "tasks" / "task_0001", "mined")
    task = Task.objects.get(task_id="task_0001")
    trajectory_id = "5d1e2b3c-0000-4000-8000-000000000001"
    record = {
        "trajectory_id": trajectory_id,
        "task_id": task.task_id,
        "steps": [
            {
                "step": 1,
                "action_type": "run_command",
                "action_input": "git log -p --all",
                "observation": "commit a1b2c3d",
            },
            {"step": 2, "action_type": "submit", "action_input": {}, "observation": ""},
        ],
        "patch": task.expected_patch,
        "termination": "submitted",
    }
    path = tmp_path / "mined.jsonl"
    path.write_text(json.dumps(record) + "\n")
    import_trajectories(path)
    anticheat = load_spec().raw["anticheat"]
    policies = {**anticheat["policies"], "git_history_mining": "zero"}
    strict = parse_spec({"name": "no-history", "anticheat": {**anticheat, "policies": policies}})
    lenient = score_trajectory(trajectory_id, load_spec())
    assert lenient.reward == 1.0 and "git_history_mining" in {f["detector"] for f in lenient.flags}
    bounded = score_trajectory(trajectory_id, strict)
    assert bounded.reward <= 0 and not bounded.resolved, bounded.breakdown
    assert "zero" in bounded.breakdown["policies"]
