"""Running one rollout: claim it, build its policy, drive the agent loop, store how it ended."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from core.live import publish_on_commit
from tasks.models import Task
from tasks.services import TaskStoreError, task_spec_for
from trajectories.agent import AgentTask, Episode, prompt, run_episode
from trajectories.events import FinishedEvent, trajectory_live_group
from trajectories.models import RolloutBatch, Step, Trajectory, duplicate_rate
from trajectories.policies.base import Policy, PolicyError
from trajectories.policies.registry import PolicySettings, policy_registry
from trajectories.progress import batch_cancelled, claim, mark_batch_running, record_trajectory_end
from trajectories.recorder import DBRecorder
from trajectories.signals import trajectory_finished

logger = logging.getLogger(__name__)


def agent_task(task: Task, max_steps: int) -> AgentTask:
    spec = task_spec_for(task)
    return AgentTask(
        task_id=task.task_id,
        statement=task.statement,
        base_dir=spec.base_dir,
        version=task.version,
        base_commit=task.base_commit,
        visible_tests=list(task.visible_tests),
        max_steps=max_steps,
        timeout_seconds=float(task.timeout_seconds) * 5,
        command_timeout=float(task.timeout_seconds),
    )


def build_policy(batch: RolloutBatch, task: Task, spec: AgentTask, seed: int) -> Policy:
    return policy_registry.build(
        batch.policy_kind,
        PolicySettings(
            model=batch.model,
            base_url=batch.base_url,
            temperature=batch.temperature,
            top_p=batch.top_p,
            seed=seed,
            max_new_tokens=batch.max_new_tokens,
            base_dir=spec.base_dir,
            expected_patch=task.expected_patch,
        ),
    )


def run_trajectory(trajectory_pk: int, stale_after: float | None = None) -> Trajectory | None:
    """Run one claimed rollout to its end and record it; None if it was not ours to run."""
    if not claim(trajectory_pk, stale_after):
        return None
    trajectory = Trajectory.objects.select_related("batch", "task").get(pk=trajectory_pk)
    batch, task = trajectory.batch, trajectory.task
    assert batch is not None and task is not None
    mark_batch_running(batch)
    seed = batch.seed * 1000 + (trajectory.sample_index or 0)
    try:
        spec = agent_task(task, batch.max_steps)
    except TaskStoreError as exc:
        return fail(trajectory, str(exc))
    try:
        policy = build_policy(batch, task, spec, seed)
    except (PolicyError, OSError) as exc:
        return fail(trajectory, f"the policy could not start: {exc}")
    recorder = DBRecorder(trajectory)
    try:
        episode = run_episode(spec, policy, recorder, batch.sandbox, should_stop=lambda: batch_cancelled(batch.pk))
    finally:
        policy.close()
        recorder.flush()
    return finish(trajectory, episode, policy.describe(), spec)


def fail(trajectory: Trajectory, error: str) -> Trajectory:
    logger.warning("trajectory %s failed before its episode ran: %s", trajectory.trajectory_id, error)
    Trajectory.objects.filter(pk=trajectory.pk).update(status=Trajectory.Status.FAILED, error=error[:5000])
    trajectory.refresh_from_db()
    record_trajectory_end(trajectory)
    return trajectory


def finish(trajectory: Trajectory, episode: Episode, provenance: dict[str, Any], spec: AgentTask) -> Trajectory:
    status = Trajectory.Status.CANCELLED if episode.cancelled else Trajectory.Status.FINISHED
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
            list(Step.objects.filter(trajectory=trajectory).order_by("step").values_list("action_type", "action_input"))
        )
        trajectory.save(
            update_fields=[
                "status",
                "termination",
                "patch",
                "policy",
                "policy_kind",
                "policy_model",
                "sandbox",
                "prompt",
                "error",
                "step_count",
                "duplicate_rate",
            ]
        )
        if not episode.cancelled:
            # Rollouts never score inline: the reward service listens for this and takes it from here.
            trajectory_finished.send(sender=Trajectory, trajectory=trajectory)
        event: FinishedEvent = {"kind": "finished", "status": status, "termination": episode.termination}
        publish_on_commit(trajectory_live_group(trajectory.trajectory_id), event)
    record_trajectory_end(trajectory)
    return trajectory
