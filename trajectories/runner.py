"""Running one rollout: claim it, build its policy, drive the agent loop, store how it ended."""

from __future__ import annotations

import logging
import os
import signal
import threading
import traceback
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import states
from core.live import publish_on_commit
from sandbox import SandboxError
from sandbox.core import sandboxes_root
from sandbox.process import signal_group
from tasks.models import Task
from tasks.services import TaskStoreError, task_spec_for
from trajectories.agent import AgentTask, Episode, prompt, run_episode
from trajectories.events import AttemptEvent, FinishedEvent, trajectory_live_group
from trajectories.models import RolloutBatch, Step, Trajectory, duplicate_rate
from trajectories.policies.base import Policy, PolicyError
from trajectories.policies.registry import PolicySettings, policy_registry
from trajectories.progress import batch_cancelled, claim, mark_batch_running, record_trajectory_end, stale_after
from trajectories.recorder import DBRecorder
from trajectories.signals import trajectory_finished

logger = logging.getLogger(__name__)

# How often a running trajectory looks for its batch's cancel: a cancel stops it within about this.
CANCEL_POLL_S = 0.5
# A failed rollout's error keeps the end of its traceback (what a worker log would show), bounded.
LOG_TAIL_CHARS = 3000
ERROR_MAX = 5000


def agent_task(task: Task, max_steps: int) -> AgentTask:
    return AgentTask.of(task_spec_for(task), max_steps)


def build_policy(batch: RolloutBatch, task: Task, agent_task: AgentTask, seed: int) -> Policy:
    return policy_registry.build(
        batch.policy_kind,
        PolicySettings(
            model=batch.model,
            base_url=batch.base_url,
            temperature=batch.temperature,
            top_p=batch.top_p,
            seed=seed,
            max_new_tokens=batch.max_new_tokens,
            base_dir=agent_task.base_dir,
            expected_patch=task.expected_patch,
        ),
    )


def run_trajectory(trajectory_pk: int) -> Trajectory | None:
    """Run one claimed rollout to its end and record it; None if it was not ours to run.

    None too when the attempt was superseded half-way (it stopped beating for longer than the
    stale window, and another worker took the rollout over): it stops its policy and sandbox
    and writes nothing more; the other attempt's record is the rollout's.
    """
    lease = claim(trajectory_pk)
    if lease is None:
        return None
    trajectory = Trajectory.objects.select_related("batch", "task").get(pk=trajectory_pk)
    batch, task = trajectory.batch, trajectory.task
    assert batch is not None and task is not None
    if lease.attempt > 1:
        # A page still showing the last attempt's steps starts over (static/js/trajectory.js).
        event: AttemptEvent = {"kind": "attempt", "attempt": lease.attempt}
        publish_on_commit(trajectory_live_group(trajectory.trajectory_id), event)
    mark_batch_running(batch)
    seed = batch.seed * 1000 + (trajectory.sample_index or 0)
    try:
        work = agent_task(task, batch.max_steps)
    except TaskStoreError as exc:
        return fail(trajectory, lease, str(exc), exc)
    except SandboxError as exc:
        # Its environment cannot be built, or this host cannot run its tests (no Go toolchain, a
        # lock that cannot be installed): a failure to show and re-run elsewhere, never an episode.
        return fail(trajectory, lease, f"the task cannot run here: {exc}", exc)
    try:
        policy = build_policy(batch, task, work, seed)
    except (PolicyError, OSError) as exc:
        return fail(trajectory, lease, f"the policy could not start: {exc}", exc)
    recorder = DBRecorder(trajectory, lease)
    with AttemptWatch(trajectory, lease) as watch:
        # The policy may stop a generation half-way when it sees this set (the hf policy's stopping criteria).
        policy.stop_event = watch.stopped
        try:
            episode = run_episode(work, policy, recorder, batch.sandbox, should_stop=watch.should_stop)
            watch.heartbeat.check()
        except states.Superseded:
            logger.warning(
                "trajectory %s: attempt %d was superseded (another worker took it over); it stops, writing nothing",
                trajectory.trajectory_id,
                lease.attempt,
            )
            return None
        except SandboxError as exc:
            return fail(trajectory, lease, f"the sandbox could not start: {exc}", exc)
        finally:
            policy.close()
            if not watch.heartbeat.lost.is_set():
                recorder.flush()
    return finish(trajectory, lease, episode, policy.describe(), work)


class AttemptWatch:
    """Keeps a running attempt's lease alive and stops what it runs when it must stop.

    The agent loop looks for a stop only between steps, and one step can take minutes (a model
    generation, a test run, a slow server). So a thread beats the lease on the wall clock
    (core.states.Heartbeat) whatever the step is doing, and watches for the batch's cancel. On a
    cancel, or when the lease turns out to be lost (this attempt was stopped for longer than the
    stale window and another worker took over), it sets `stopped` (which a policy's generation
    observes) and kills the process groups of the sandbox commands this process is running,
    again at each poll, since the loop may start one more before it sees the stop.
    """

    def __init__(self, trajectory: Trajectory, lease: states.Lease) -> None:
        assert trajectory.batch_id is not None
        self.trajectory = trajectory
        self.batch_pk = trajectory.batch_id
        self.stopped = threading.Event()
        self.heartbeat = states.Heartbeat(
            lease, stale_after() / 4, on_lost=self._stop, poll=self._poll, poll_every=CANCEL_POLL_S
        )

    def should_stop(self) -> bool:
        # A lost lease ends the loop through the recorder's next fenced write; a cancel as an episode.
        self.heartbeat.check()
        if not self.stopped.is_set() and batch_cancelled(self.batch_pk):
            self.stopped.set()
        return self.stopped.is_set()

    def __enter__(self) -> AttemptWatch:
        self.heartbeat.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.heartbeat.__exit__()

    def _poll(self) -> None:
        if self.stopped.is_set() or batch_cancelled(self.batch_pk):
            if not self.stopped.is_set():
                logger.info("trajectory %s: batch cancelled, stopping it", self.trajectory.trajectory_id)
            self._stop()

    def _stop(self) -> None:
        self.stopped.set()
        kill_sandbox_commands()


def kill_sandbox_commands() -> int:
    """SIGKILL every sandbox command this process is running now; how many were killed.

    A sandbox runs each command as its own session under `<sandboxes_root>/<pid>-...`
    (sandbox.core.Sandbox), in that directory; so a child of this process that leads its
    own session and works there is one. Nothing else of the process is touched.
    """
    me = os.getpid()
    prefix = os.path.realpath(sandboxes_root()) + f"/{me}-"
    killed = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            ppid, session = int(fields[1]), int(fields[3])
            if ppid != me or session != pid:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().decode(errors="replace")
            if prefix not in argv and not os.readlink(f"/proc/{pid}/cwd").startswith(prefix):
                continue
            killed += signal_group(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    if killed:
        logger.info("killed %d running sandbox command(s) of a cancelled trajectory", killed)
    return killed


def fail(trajectory: Trajectory, lease: states.Lease, error: str, exc: BaseException | None = None) -> Trajectory:
    """Record why a rollout could not run: the error's line, then the log tail that says where."""
    logger.warning("trajectory %s failed before its episode ran: %s", trajectory.trajectory_id, error)
    if exc is not None:
        tail = "".join(traceback.format_exception(exc))[-LOG_TAIL_CHARS:]
        error = f"{error}\n\nlog tail:\n{tail}"
    if not states.end(lease, states.FAILED, trajectory, error=error[:ERROR_MAX]):
        logger.warning("trajectory %s: its failure was not recorded; the row moved on", trajectory.trajectory_id)
        return trajectory
    trajectory.refresh_from_db()
    record_trajectory_end(trajectory)
    return trajectory


def finish(
    trajectory: Trajectory,
    lease: states.Lease,
    episode: Episode,
    provenance: dict[str, Any],
    work: AgentTask,
    *,
    enqueue_scoring: bool = True,
) -> Trajectory:
    """Record how the episode ended. `enqueue_scoring` False: the caller scores it itself at once
    (the environment server, whose client waits for the reward), so no job is queued beside it."""
    status = Trajectory.Status.FINISHED
    if episode.cancelled:
        status = Trajectory.Status.CANCELLED
    elif episode.error:
        # The policy or the sandbox broke (a model server away, a backend missing): not an
        # outcome of the agent's to score or train on, but a failure to show and to re-run.
        status = Trajectory.Status.FAILED
    fields: dict[str, Any] = {
        "termination": episode.termination,
        "patch": episode.patch,
        "policy": provenance,
        "policy_kind": str(provenance.get("kind", ""))[:32],
        "policy_model": str(provenance.get("model", ""))[:300],
        "sandbox": {**episode.sandbox, "sandbox_ms": episode.sandbox_ms, "policy_ms": episode.policy_ms},
        "prompt": "\n\n".join(m.content for m in prompt(work)),
        "error": episode.error,
        "step_count": episode.steps,
        "duplicate_rate": duplicate_rate(
            list(Step.objects.filter(trajectory=trajectory).order_by("step").values_list("action_type", "action_input"))
        ),
        "heartbeat_at": timezone.now(),
    }

    def record_end() -> bool:
        with transaction.atomic():
            # Only the attempt that claimed the row writes its end: a worker whose row was taken
            # over (it looked dead) leaves the new attempt's record alone.
            if not states.end(lease, status, trajectory, **fields):
                return False
            if status == Trajectory.Status.FINISHED and enqueue_scoring:
                # Rollouts never score inline: the reward service listens for this and takes it from here.
                trajectory_finished.send(sender=Trajectory, trajectory=trajectory)
            event: FinishedEvent = {"kind": "finished", "status": status, "termination": episode.termination}
            publish_on_commit(trajectory_live_group(trajectory.trajectory_id), event)
            return True

    if not states.retry_locked(record_end):
        logger.warning("trajectory %s: its end was not recorded; the row moved on", trajectory.trajectory_id)
        return trajectory
    record_trajectory_end(trajectory)
    return trajectory
