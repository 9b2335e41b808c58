"""Verbs for rollouts: start, claim, record, finish, resume and cancel batches."""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, F, Max, Min, Q
from django.utils import timezone

from tasks.models import Task, TaskSuite
from tasks.services import task_spec_for
from trajectories.agent import AgentTask, Episode, prompt, run_episode
from trajectories.bulk import insert_steps, step_row
from trajectories.models import RolloutBatch, Step, Trajectory, duplicate_rate
from trajectories.policies.base import Policy, PolicyError
from core.live import publish_on_commit

ROLLOUT_NS = uuid.UUID("1d3f5a40-8c1b-4f6e-9a2d-5b7c3e9f0a11")
POLICIES = ("scripted", "hf", "openai")
LIVE_FLUSH_S = 0.05  # steps from fast policies go out together, at most this often


class RolloutError(ValueError):
    pass


def rollout_id(batch: RolloutBatch, task_id: str, sample: int) -> uuid.UUID:
    return uuid.uuid5(ROLLOUT_NS, f"{batch.pk}:{task_id}:{sample}")


@transaction.atomic
def start_batch(suite: TaskSuite, policy_kind: str, model: str = "", *, samples: int = 1, temperature: float = 0.8,
                top_p: float = 1.0, max_steps: int = 30, sandbox: str = "bwrap", seed: int = 0, base_url: str = "",
                max_new_tokens: int = 256, user: Any = None, enqueue: bool = True) -> RolloutBatch:
    if policy_kind not in POLICIES:
        raise RolloutError(f"policy must be one of {', '.join(POLICIES)}")
    if policy_kind == "openai" and not base_url:
        raise RolloutError("the openai policy needs the server's base URL")
    if not 1 <= samples <= 64 or not 1 <= max_steps <= 200 or not 0 <= temperature <= 2 or not 0 < top_p <= 1:
        raise RolloutError("samples 1-64, max steps 1-200, temperature 0-2, top_p in (0, 1]")
    if sandbox not in ("bwrap", "docker"):
        raise RolloutError("sandbox must be bwrap or docker")
    tasks = list(suite.tasks.order_by("task_id"))
    if not tasks:
        raise RolloutError(f"suite {suite.name} has no tasks")
    if policy_kind == "scripted" and any(not t.expected_patch.strip() for t in tasks):
        raise RolloutError("the scripted policy needs every task to have an expected patch")
    batch = RolloutBatch.objects.create(
        suite=suite, policy_kind=policy_kind, model=model or default_model(policy_kind), base_url=base_url,
        samples=samples, temperature=temperature, top_p=top_p, max_steps=max_steps, sandbox=sandbox, seed=seed,
        max_new_tokens=max_new_tokens, created_by=user if getattr(user, "pk", None) else None)
    now = timezone.now()
    Trajectory.objects.bulk_create([
        Trajectory(trajectory_id=rollout_id(batch, t.task_id, i), batch=batch, sample_index=i, task=t, suite=suite,
                   task_ref=t.task_id, task_version=t.version, base_commit=t.base_commit,
                   status=Trajectory.Status.QUEUED, source=Trajectory.Source.ONLINE, created_at=now)
        for t in tasks for i in range(samples)
    ])
    if enqueue:
        transaction.on_commit(lambda: enqueue_missing(batch))
    return batch


def default_model(policy_kind: str) -> str:
    if policy_kind == "scripted":
        return "oracle"
    if policy_kind == "hf":
        return str(settings.CRUCIBLE_DEFAULT_MODEL)
    return ""


def pending(batch: RolloutBatch, stale_after: float | None = None) -> list[Trajectory]:
    """Trajectories still to run: queued, failed, cancelled, or running with a dead heartbeat."""
    waiting = Q(status__in=[Trajectory.Status.QUEUED, Trajectory.Status.FAILED, Trajectory.Status.CANCELLED])
    if stale_after is not None:
        cutoff = timezone.now() - timedelta(seconds=stale_after)
        waiting |= Q(status=Trajectory.Status.RUNNING) & (Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at=None))
    return list(batch.trajectories.filter(waiting).order_by("id"))


def enqueue_missing(batch: RolloutBatch, stale_after: float | None = None) -> int:
    from trajectories.jobs import run_trajectory_job

    todo = pending(batch, stale_after)
    for trajectory in todo:
        run_trajectory_job.delay(trajectory.pk, stale_after)
    return len(todo)


def resume_batch(batch: RolloutBatch, stale_after: float = 120.0) -> int:
    """Re-run only what is missing; a trajectory already finished is never run twice."""
    RolloutBatch.objects.filter(pk=batch.pk).update(status=RolloutBatch.Status.QUEUED, finished_at=None)
    return enqueue_missing(batch, stale_after)


def cancel_batch(batch: RolloutBatch) -> None:
    with transaction.atomic():
        RolloutBatch.objects.filter(pk=batch.pk).update(status=RolloutBatch.Status.CANCELLED)
        batch.trajectories.filter(status=Trajectory.Status.QUEUED).update(status=Trajectory.Status.CANCELLED)
        publish_on_commit(f"batch-{batch.pk}", {"kind": "status", "status": "cancelled"})


def claim(trajectory_pk: int, stale_after: float | None = None) -> bool:
    """Take a trajectory for this worker; False when another worker has it or it is done.

    A single UPDATE ... WHERE is the lock: two workers given the same trajectory (a
    redelivered message, a resume) cannot both win.
    """
    claimable = Q(status__in=[Trajectory.Status.QUEUED, Trajectory.Status.FAILED])
    if stale_after is not None:
        cutoff = timezone.now() - timedelta(seconds=stale_after)
        claimable |= Q(status=Trajectory.Status.RUNNING) & (Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at=None))
    claimable |= Q(status=Trajectory.Status.CANCELLED) & ~Q(batch__status=RolloutBatch.Status.CANCELLED)
    won = Trajectory.objects.filter(Q(pk=trajectory_pk) & claimable).update(
        status=Trajectory.Status.RUNNING, heartbeat_at=timezone.now(), attempt=F("attempt") + 1)
    if won:
        # Steps of an attempt that died half-way are dropped: the new attempt starts clean.
        Step.objects.filter(trajectory_id=trajectory_pk).delete()
        Trajectory.objects.filter(pk=trajectory_pk).update(step_count=0, error="")
    return bool(won)


class DBRecorder:
    """Each step committed on its own, then sent live; a crash loses at most one step."""

    def __init__(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        self.group = f"trajectory-{trajectory.trajectory_id}"
        self.buffer: list[dict[str, Any]] = []
        self.last_flush = 0.0

    def step(self, record: dict[str, Any]) -> None:
        policy_ms = record.pop("policy_ms", None)
        row = {**record, "reward": None, "reward_breakdown": {}, "extra": {"policy_ms": policy_ms}}
        with transaction.atomic():
            insert_steps([step_row(self.trajectory.pk, row)])
            Trajectory.objects.filter(pk=self.trajectory.pk).update(
                step_count=record["step"], heartbeat_at=timezone.now())
        self.buffer.append(live_step(row))
        if time.monotonic() - self.last_flush >= LIVE_FLUSH_S:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            steps, self.buffer = self.buffer, []
            # Outside a transaction (a worker) this sends at once; inside one, after it.
            publish_on_commit(self.group, {"kind": "steps", "steps": steps})
            if self.trajectory.batch_id:
                publish_on_commit(f"batch-{self.trajectory.batch_id}", {
                    "kind": "step", "trajectory_id": str(self.trajectory.trajectory_id), "step": steps[-1]["step"]})
        self.last_flush = time.monotonic()


def live_step(row: dict[str, Any]) -> dict[str, Any]:
    stamp = row.get("timestamp")
    return {"step": row["step"], "action_type": row["action_type"], "action_input": row["action_input"],
            "observation": row["observation"][:20000], "thought": row["thought"][:20000],
            "exit_code": row["exit_code"], "duration_ms": row.get("duration_ms"),
            "timestamp": stamp.isoformat() if stamp else None}


def make_policy(batch: RolloutBatch, task: Task, seed: int) -> Policy:
    if batch.policy_kind == "scripted":
        from trajectories.policies.scripted import ScriptedPolicy

        return ScriptedPolicy(task_spec_for(task).base_dir, task.expected_patch)
    if batch.policy_kind == "hf":
        from trajectories.policies.hf import HFPolicy

        return HFPolicy(batch.model, temperature=batch.temperature, top_p=batch.top_p, seed=seed,
                        max_new_tokens=batch.max_new_tokens)
    if batch.policy_kind == "openai":
        from trajectories.policies.openai import OpenAIPolicy

        return OpenAIPolicy(batch.base_url, batch.model, temperature=batch.temperature, top_p=batch.top_p, seed=seed,
                            max_tokens=batch.max_new_tokens)
    raise RolloutError(f"unknown policy {batch.policy_kind!r}")


def agent_task(task: Task, max_steps: int) -> AgentTask:
    spec = task_spec_for(task)
    return AgentTask(task.task_id, task.statement, spec.base_dir, task.version, task.base_commit,
                     list(task.visible_tests), max_steps, float(task.timeout_seconds) * 5, float(task.timeout_seconds))


def run_trajectory(trajectory_pk: int, stale_after: float | None = None) -> Trajectory | None:
    """Run one claimed rollout to its end and record it; None if it was not ours to run."""
    if not claim(trajectory_pk, stale_after):
        return None
    trajectory = Trajectory.objects.select_related("batch", "task").get(pk=trajectory_pk)
    batch, task = trajectory.batch, trajectory.task
    assert batch is not None and task is not None
    if batch.status == RolloutBatch.Status.QUEUED:
        RolloutBatch.objects.filter(pk=batch.pk, status=RolloutBatch.Status.QUEUED).update(
            status=RolloutBatch.Status.RUNNING, started_at=timezone.now())
    seed = batch.seed * 1000 + (trajectory.sample_index or 0)
    recorder = DBRecorder(trajectory)
    try:
        policy = make_policy(batch, task, seed)
    except (PolicyError, RolloutError, OSError) as exc:
        return _fail(trajectory, f"the policy could not start: {exc}")
    spec = agent_task(task, batch.max_steps)
    try:
        episode = run_episode(spec, policy, recorder, batch.sandbox, should_stop=lambda: _cancelled(batch.pk))
    finally:
        policy.close()
        recorder.flush()
    return finish(trajectory, episode, policy.describe(), spec)


def _cancelled(batch_pk: int) -> bool:
    return RolloutBatch.objects.filter(pk=batch_pk, status=RolloutBatch.Status.CANCELLED).exists()


def _fail(trajectory: Trajectory, error: str) -> Trajectory:
    Trajectory.objects.filter(pk=trajectory.pk).update(status=Trajectory.Status.FAILED, error=error[:5000])
    trajectory.refresh_from_db()
    _after_trajectory(trajectory)
    return trajectory


def finish(trajectory: Trajectory, episode: Episode, provenance: dict[str, Any], spec: AgentTask) -> Trajectory:
    from rewards.jobs import score_trajectory_job

    cancelled = episode.error == "cancelled"
    status = Trajectory.Status.CANCELLED if cancelled else Trajectory.Status.FINISHED
    with transaction.atomic():
        trajectory.status = status
        trajectory.termination = episode.termination
        trajectory.patch = episode.patch
        trajectory.policy = provenance
        trajectory.policy_kind = str(provenance.get("kind", ""))[:32]
        trajectory.policy_model = str(provenance.get("model", ""))[:300]
        trajectory.sandbox = {**episode.sandbox, "sandbox_ms": episode.sandbox_ms, "policy_ms": episode.policy_ms}
        trajectory.prompt = "\n\n".join(m.content for m in prompt(spec))
        trajectory.error = episode.error
        trajectory.step_count = episode.steps
        trajectory.duplicate_rate = duplicate_rate(
            list(Step.objects.filter(trajectory=trajectory).order_by("step").values_list("action_type", "action_input")))
        trajectory.save(update_fields=["status", "termination", "patch", "policy", "policy_kind", "policy_model",
                                       "sandbox", "prompt", "error", "step_count", "duplicate_rate"])
        if not cancelled:
            # Rollouts never score inline: the reward service takes it from here.
            pk = str(trajectory.trajectory_id)
            transaction.on_commit(lambda: score_trajectory_job.delay(pk))
        publish_on_commit(f"trajectory-{trajectory.trajectory_id}", {
            "kind": "finished", "status": status, "termination": episode.termination})
    _after_trajectory(trajectory)
    return trajectory


def _after_trajectory(trajectory: Trajectory) -> None:
    batch = trajectory.batch
    if batch is None:
        return
    counts = batch_counts(batch)
    with transaction.atomic():
        if counts["left"] == 0 and batch.status != RolloutBatch.Status.CANCELLED:
            status = RolloutBatch.Status.FAILED if counts["failed"] else RolloutBatch.Status.SUCCEEDED
            RolloutBatch.objects.filter(pk=batch.pk).update(status=status, finished_at=timezone.now())
            counts["batch_status"] = status
        publish_on_commit(f"batch-{batch.pk}", {"kind": "trajectory", "trajectory_id": str(trajectory.trajectory_id),
                                                "status": trajectory.status, "termination": trajectory.termination,
                                                "steps": trajectory.step_count, **counts})


def batch_counts(batch: RolloutBatch) -> dict[str, Any]:
    by_status = dict(batch.trajectories.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    total = sum(by_status.values())
    done = by_status.get(Trajectory.Status.FINISHED, 0)
    failed = by_status.get(Trajectory.Status.FAILED, 0)
    return {"total": total, "finished": done, "failed": failed,
            "left": total - done - failed - by_status.get(Trajectory.Status.CANCELLED, 0)}


def batch_metrics(batch: RolloutBatch) -> dict[str, Any]:
    """Seed §8's three: trajectories per hour, sandbox start-up, step latency."""
    finished = batch.trajectories.filter(status=Trajectory.Status.FINISHED)
    span = finished.aggregate(first=Min("created_at"), last=Max("heartbeat_at"))
    hours = ((span["last"] - batch.started_at).total_seconds() / 3600) if span["last"] and batch.started_at else 0
    startups = [s.get("startup_ms") for s in finished.values_list("sandbox", flat=True) if s and s.get("startup_ms")]
    steps = Step.objects.filter(trajectory__batch=batch).aggregate(avg=Avg("duration_ms"))
    return {
        "trajectories_per_hour": round(finished.count() / hours, 1) if hours > 0 else None,
        "avg_sandbox_startup_ms": round(sum(startups) / len(startups), 1) if startups else None,
        "avg_step_latency_ms": round(steps["avg"], 1) if steps["avg"] is not None else None,
        "resolved": finished.filter(success=True).count(),
        **batch_counts(batch),
    }


# What legitimately differs between two runs of the same action: timings and the
# per-run report path the test runner is given.
TIMING = re.compile(r"\bin \d+(\.\d+)?s\b|\d+(\.\d+)? ?ms\b|/run/[0-9a-f]{32}")


@dataclass
class ReplayReport:
    trajectory_id: str
    steps: int
    same: int
    differences: list[dict[str, Any]]

    @property
    def reproducible(self) -> bool:
        return not self.differences


class _Collect:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def step(self, record: dict[str, Any]) -> None:
        self.records.append(record)


def replay_trajectory(trajectory_id: str, backend: str = "bwrap") -> ReplayReport:
    """Run a recorded trajectory's actions again in a fresh sandbox: same observations?

    Timings ("3 passed in 0.05s") and report paths are ignored; everything else
    must match, or the difference is reported step by step.
    """
    from trajectories.policies.replay import ReplayPolicy

    trajectory = Trajectory.objects.select_related("task").get(trajectory_id=trajectory_id)
    if trajectory.task is None:
        raise RolloutError(f"task {trajectory.task_ref!r} is not in this database")
    recorded = list(trajectory.steps.order_by("step").values("step", "action_type", "action_input", "observation",
                                                             "thought"))
    spec = agent_task(trajectory.task, max_steps=len(recorded) + 1)
    collected = _Collect()
    run_episode(spec, ReplayPolicy([dict(s) for s in recorded], str(trajectory_id)), collected, backend)
    differences = []
    for old, new in zip(recorded, collected.records, strict=False):
        if TIMING.sub("<t>", old["observation"]) != TIMING.sub("<t>", new["observation"]):
            differences.append({"step": old["step"], "recorded": old["observation"][:2000],
                                "replayed": new["observation"][:2000]})
    same = min(len(recorded), len(collected.records)) - len(differences)
    return ReplayReport(str(trajectory_id), len(recorded), same, differences)
