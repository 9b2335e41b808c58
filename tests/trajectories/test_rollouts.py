"""Rollouts: the scripted oracle solves every demo task; batches resume without duplicates."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from core.vocabulary import PolicyKind
from rewards.services import score_trajectory
from rewards.spec import load_spec
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, start_worker
from trajectories.batches import resume_batch, start_batch
from trajectories.models import RolloutBatch, Step, Trajectory
from trajectories.policies.registry import policy_registry
from trajectories.replay import replay_trajectory
from trajectories.rollout_settings import RolloutError, RolloutSettings
from trajectories.runner import run_trajectory
from trajectories.schema import check_record

SMALL = ("task_0001", "task_0008", "task_0013")
SCORE_SPEC = load_spec()


def small_suite(name: str = "small") -> TaskSuite:
    for task_id in SMALL:
        import_task_dirs(DEMO / "tasks" / task_id, name)
    return TaskSuite.objects.get(name=name)


@pytest.mark.django_db
def test_the_scripted_policy_solves_every_demo_task_with_reward_1(demo_suite: TaskSuite) -> None:
    batch = start_batch(demo_suite, RolloutSettings("scripted"), enqueue=False)
    for trajectory in batch.trajectories.all():
        run_trajectory(trajectory.pk)
    finished = list(batch.trajectories.all())
    assert len(finished) == demo_suite.tasks.count() >= 12
    for trajectory in finished:
        assert trajectory.status == "finished" and trajectory.termination == "submitted", trajectory.error
        actions = list(trajectory.steps.order_by("step").values_list("action_type", flat=True))
        assert actions[0] == "read_file" and actions[-2:] == ["run_tests", "submit"]
        assert {"edit_file", "write_file"} & set(actions)
        assert score_trajectory(str(trajectory.trajectory_id)).reward == 1.0
    batch.refresh_from_db()
    assert batch.status == RolloutBatch.Status.SUCCEEDED


@pytest.mark.django_db
def test_a_rollout_records_full_provenance_and_exports_as_valid_jsonl() -> None:
    batch = start_batch(small_suite(), RolloutSettings("scripted", temperature=0.0, seed=3), enqueue=False)
    trajectory = run_trajectory(batch.trajectories.first().pk)  # type: ignore[union-attr]
    assert trajectory is not None
    assert trajectory.policy["kind"] == "scripted" and trajectory.task_version.startswith("sha256:")
    assert trajectory.sandbox["backend"] == "bwrap" and trajectory.sandbox["startup_ms"] > 0
    from trajectories.exports import iter_trajectory_lines

    line = next(iter_trajectory_lines(Trajectory.objects.filter(pk=trajectory.pk)))

    record = check_record(json.loads(line), 1, line)  # the exported line passes our own import checks
    assert len(record["steps"]) == trajectory.step_count
    assert all(s["timestamp"] is not None and s["duration_ms"] is not None for s in record["steps"])


@pytest.mark.django_db
def test_a_trajectory_is_claimed_once_even_if_delivered_twice() -> None:
    batch = start_batch(small_suite(), RolloutSettings("scripted"), enqueue=False)
    first = batch.trajectories.first()
    assert first is not None
    assert run_trajectory(first.pk) is not None
    assert run_trajectory(first.pk) is None  # already finished: a second delivery does nothing
    assert Step.objects.filter(trajectory=first).count() == Trajectory.objects.get(pk=first.pk).step_count


@pytest.mark.django_db
def test_bad_batch_settings_are_refused() -> None:
    suite = small_suite()
    for kwargs, message in [
        ({"policy_kind": "gpt9"}, "policy must be"),
        ({"policy_kind": "openai"}, "base URL"),
        ({"policy_kind": "scripted", "samples": 0}, "samples"),
        ({"policy_kind": "scripted", "sandbox": "vm"}, "sandbox"),
        ({"policy_kind": "scripted", "sandbox": "local"}, "sandbox must be bwrap or docker"),
        ({"policy_kind": "scripted", "max_new_tokens": 8}, "max new tokens 16-4096"),
    ]:
        with pytest.raises(RolloutError, match=message):
            start_batch(suite, RolloutSettings(**kwargs), enqueue=False)  # type: ignore[arg-type]
    assert not RolloutBatch.objects.exists()


@pytest.mark.django_db
def test_a_policy_kind_nobody_registered_fails_the_trajectory_with_the_reason() -> None:
    batch = start_batch(small_suite(), RolloutSettings("scripted"), enqueue=False)
    RolloutBatch.objects.filter(pk=batch.pk).update(policy_kind="gpt9")  # e.g. a row from an older release
    trajectory = run_trajectory(batch.trajectories.first().pk)  # type: ignore[union-attr]
    assert trajectory is not None and trajectory.status == "failed"
    assert "the policy could not start: unknown policy 'gpt9'" in trajectory.error
    with pytest.raises(ValueError, match="registered twice"):
        policy_registry.register(PolicyKind.SCRIPTED, lambda settings: pytest.fail("never built"))


def interrupting_after_one() -> Callable[[int], Trajectory | None]:
    calls = {"n": 0}

    def run(pk: int) -> Trajectory | None:
        calls["n"] += 1
        result = run_trajectory(pk)
        if calls["n"] == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the batch runs
        return result

    return run


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_rollout_command_writes_the_scored_jsonl_and_resumes_after_ctrl_c_or_a_scoring_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    small_suite()
    out = tmp_path / "out"
    command = ["rollout", "--suite", "small", "--policy", "scripted", "--output-dir", str(out)]
    import trajectories.management.commands.rollout as rollout_command

    with monkeypatch.context() as patched:
        patched.setattr(rollout_command, "run_trajectory", interrupting_after_one())
        with pytest.raises(CommandError, match="run the same command again to resume"):
            call_command(*command, verbosity=0)
    assert list(out.glob("*.jsonl")) == []  # nothing is written before the reward service has scored it

    # No worker on the rewards queue: the batch finishes, its scores never come.
    with pytest.raises(CommandError, match=r"scored 0 of 3 finished trajectories .* within 1 s, so no JSONL"):
        call_command(*command, "--score-timeout", "1", verbosity=0)
    assert list(out.glob("*.jsonl")) == [] and RolloutBatch.objects.count() == 1

    worker = start_worker("rewards")
    next(worker)
    try:
        started = time.monotonic()
        call_command(*command, "--score-timeout", "180", verbosity=0)
        waited = time.monotonic() - started
    finally:
        for _ in worker:
            pass
    printed = capsys.readouterr().out
    assert "resuming batch" in printed and f"scored under {SCORE_SPEC.version}" in printed
    assert RolloutBatch.objects.count() == 1
    (jsonl,) = out.glob("*.jsonl")
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert sorted(line["task_id"] for line in lines) == sorted(SMALL)
    for line in lines:
        assert (line["final_reward"], line["success"], line["flags"]) == (1.0, True, []), line
        assert "claimed" not in line
        check_record(line, 1, json.dumps(line).encode())
    assert waited < 170
    with pytest.raises(CommandError, match="no suite named"):
        call_command("rollout", "--suite", "nope", "--policy", "scripted", verbosity=0)
    with pytest.raises(CommandError, match="--score-timeout must be a positive"):
        call_command("rollout", "--suite", "small", "--policy", "scripted", "--score-timeout", "-1", verbosity=0)


STALE_S = 3
STALE_ENV = {"CRUCIBLE_ROLLOUT_STALE_S": str(STALE_S)}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_killing_the_worker_mid_batch_then_resuming_leaves_no_duplicates(settings: Any) -> None:
    settings.CRUCIBLE_ROLLOUT_STALE_S = STALE_S  # the resume below takes a row once its beats stopped this long
    suite = small_suite("killed")
    batch = start_batch(suite, RolloutSettings("scripted", samples=2))
    worker_iter = start_worker("rollouts", env=STALE_ENV)
    worker = next(worker_iter)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if Trajectory.objects.filter(batch=batch, status="running", step_count__gte=1).exists():
            break
        time.sleep(0.02)
    else:
        pytest.fail("no trajectory started")
    os.kill(worker.pid, signal.SIGKILL)  # mid-trajectory: no chance to clean up
    worker.wait()
    running = Trajectory.objects.filter(batch=batch, status="running")
    assert running.exists(), "the killed worker left a trajectory half-done"
    time.sleep(STALE_S + 0.5)  # its beats stopped with it
    second = start_worker("rollouts", env=STALE_ENV)
    next(second)
    try:
        resume_batch(batch)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            batch.refresh_from_db()
            if batch.status in ("succeeded", "failed"):
                break
            time.sleep(0.2)
    finally:
        for gen in (second, worker_iter):
            for _ in gen:
                pass
    batch.refresh_from_db()
    trajectories = list(Trajectory.objects.filter(batch=batch))
    assert batch.status == "succeeded" and len(trajectories) == len(SMALL) * 2
    assert all(t.status == "finished" and t.termination == "submitted" for t in trajectories)
    for trajectory in trajectories:
        numbers = list(Step.objects.filter(trajectory=trajectory).order_by("step").values_list("step", flat=True))
        assert numbers == list(range(1, trajectory.step_count + 1))
    assert any(t.attempt == 2 for t in trajectories)  # the killed one ran again, once


@pytest.mark.django_db
def test_the_batch_page_and_dashboard_show_rollout_metrics(reviewer_client: object) -> None:
    batch = start_batch(small_suite(), RolloutSettings("scripted"), enqueue=False)
    for trajectory in batch.trajectories.all():
        run_trajectory(trajectory.pk)
    html = reviewer_client.get(f"/batches/{batch.pk}/").content.decode()  # type: ignore[attr-defined]
    assert "Trajectories / hour of rollout time" in html and "Avg sandbox start-up</dt><dd>–" not in html
    assert 'data-group="batch-' in html and html.count("data-trajectory=") == len(SMALL)
    dashboard = reviewer_client.get("/").content.decode()  # type: ignore[attr-defined]
    assert f"{len(SMALL)} finished" in dashboard and "avg step latency" in dashboard


@pytest.mark.django_db
def test_replaying_a_trajectory_reproduces_its_observations() -> None:
    batch = start_batch(small_suite(), RolloutSettings("scripted"), enqueue=False)
    trajectory = run_trajectory(batch.trajectories.first().pk)  # type: ignore[union-attr]
    assert trajectory is not None
    report = replay_trajectory(str(trajectory.trajectory_id))
    assert report.reproducible and report.same == trajectory.step_count
    step = trajectory.steps.get(step=1)
    step.observation = "something else entirely"
    step.save(update_fields=["observation"])
    changed = replay_trajectory(str(trajectory.trajectory_id))
    assert not changed.reproducible and changed.differences[0]["step"] == 1


@pytest.mark.django_db
def test_the_group_view_shows_every_rollout_of_a_task_side_by_side(reviewer_client: object) -> None:
    batch = start_batch(small_suite(), RolloutSettings("scripted", samples=2), enqueue=False)
    for trajectory in batch.trajectories.filter(task_ref="task_0001"):
        run_trajectory(trajectory.pk)
    html = reviewer_client.get(f"/batches/{batch.pk}/tasks/task_0001/").content.decode()  # type: ignore[attr-defined]
    assert html.count('<section class="card">') == 2 and "1 distinct patch<" in html
    assert 'class="diff-add"' in html
    assert reviewer_client.get(f"/batches/{batch.pk}/tasks/nope/").status_code == 404  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_the_review_screen_rescores_and_replays(researcher: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from rewards.jobs import score_trajectory_job
    from tests.conftest import client_for
    from trajectories.jobs import replay_trajectory_job

    # The jobs run right here instead of on a worker: this test is about the screen.
    monkeypatch.setattr(score_trajectory_job, "delay", lambda pk: score_trajectory_job(pk))
    monkeypatch.setattr(replay_trajectory_job, "delay", lambda pk: replay_trajectory_job(pk))
    batch = start_batch(small_suite(), RolloutSettings("scripted"), enqueue=False)
    trajectory = run_trajectory(batch.trajectories.first().pk)  # type: ignore[union-attr]
    assert trajectory is not None
    client = client_for(researcher)  # type: ignore[arg-type]
    base = f"/trajectories/{trajectory.trajectory_id}"
    rescore = reverse("rewards:rescore", args=[trajectory.trajectory_id])
    assert f'action="{rescore}"' in client.get(f"{base}/").content.decode()
    assert client.post(rescore).status_code == 302
    assert client.post(f"{base}/replay/").status_code == 302
    html = client.get(f"{base}/").content.decode()
    assert 'id="test-results"' in html and "reproducible</span> all" in html
    trajectory.refresh_from_db()
    assert trajectory.final_reward == 1.0 and trajectory.replay_report["reproducible"] is True
    assert client.get(f"{base}/replay/").status_code == 405
    assert client.get(rescore).status_code == 405
