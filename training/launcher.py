"""Run a training run: start its trainer under `accelerate launch`, follow it, record what it says.

The trainer (training.trainers, plain Python, no database) prints one JSON event per line
(metric, checkpoint, rollout, done); everything else it prints is log. This side turns the
events into RunMetric, Checkpoint and Trajectory rows and live messages on `run-<id>`, keeps
the log's tail, touches the row's heartbeat so a lost worker is noticed, and stops the
trainer's whole process group when the row is cancelled under it.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from functools import cache
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from core import states
from core.live import publish_on_commit
from core.objectstore import StoreError
from core.vocabulary import (
    ActionType,
    CheckpointKind,
    PolicyKind,
    RunStatus,
    Termination,
    TrajectorySource,
)
from tasks.models import Task
from training import fleet_episodes
from training.checkpoint_listeners import checkpoint_saved
from training.checkpoint_store import CheckpointStoreError, checkpoint_for_model, local_checkpoint, publish_checkpoint
from training.models import Checkpoint, RunMetric, TrainingRun
from training.processes import ResourcesError, run_processes, trainer_command, trainer_environment
from training.services import (
    HEARTBEAT_SECONDS,
    RunError,
    fail_lost_runs,
    live_group,
    publish_status,
    stage_run_inputs,
    stop_process_group,
    worker_name,
)
from trajectories.schema import ACTION_TYPES, ClaimedOutcome
from trajectories.services import store_trajectory

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 200
LOG_LINE_CHARS = 2000
MAX_METRIC_KEYS = 64
MAX_EVENT_BYTES = 1 << 20
# After the trainer exits, output still in flight is read for this long.
DRAIN_SECONDS = 1.0
MAX_ROLLOUT_STEPS = 200  # a rollout's completion or patch, as stored
EOF = object()
# What `accelerate launch` says when the trainer process under it was killed by SIGKILL.
SIGKILLED = "died with <Signals.SIGKILL: 9>"
OUT_OF_MEMORY = (
    "the trainer was killed by SIGKILL{evidence}: probably out of memory (the kernel's OOM killer); "
    "lower rl.batch_size or rl.max_length, or set model.torch_dtype: bfloat16"
)


def _rollout_step(raw: Any) -> dict[str, Any] | None:
    """A trainer's episode step as a record's step; a step of no known action is an invalid one."""
    if not isinstance(raw, dict):
        return None
    action_type = raw.get("action_type")
    known = action_type in ACTION_TYPES
    return {
        "action_type": action_type if known else ActionType.INVALID,
        "action_input": raw.get("action_input") if known else str(raw.get("action_input") or ""),
        "thought": str(raw.get("thought") or ""),
        "observation": str(raw.get("observation") or ""),
    }


@cache
def code_version() -> str:
    try:
        out = subprocess.run(  # noqa: S603
            ["git", "rev-parse", "HEAD"],  # noqa: S607
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    head = out.stdout.strip()
    return head if out.returncode == 0 and head else "unknown"


def _pump(stream: IO[bytes], source: str, lines: queue.Queue[Any]) -> None:
    for raw in iter(stream.readline, b""):
        lines.put((source, raw[:MAX_EVENT_BYTES].decode("utf-8", "replace").rstrip("\r\n")))
    lines.put((source, EOF))


def _finite_numbers(values: Any) -> dict[str, float]:
    if not isinstance(values, dict):
        return {}
    out: dict[str, float] = {}
    for key, value in list(values.items())[:MAX_METRIC_KEYS]:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[str(key)[:64]] = float(value)
    return out


class RunFollower:
    """What the launcher knows about one running trainer, and what it does with each event."""

    def __init__(self, run: TrainingRun, lease: states.Lease) -> None:
        self.run = run
        self.lease = lease
        self.group = live_group(run)
        # The trainer reports the run's steps (a resumed run's go on from its checkpoint's); the
        # launch's own rate counts from where it began.
        self.first_step = run.resume_from.step if run.resume_from is not None else 0
        self.tail: deque[str] = deque((run.log_tail or "").splitlines()[-LOG_TAIL_LINES:], maxlen=LOG_TAIL_LINES)
        self.metrics: dict[str, float] = dict(run.metrics or {})
        self.done_status = ""
        self.done_error = ""
        self.started = time.monotonic()
        self.parent = run.resume_from or self._base_checkpoint()
        # GRPO fleet episodes: the requests started and not yet answered (training.fleet_episodes).
        self.fleet = fleet_episodes.Requests()

    def on_episodes(self, event: dict[str, Any]) -> None:
        self.tail.append(f"[crucible] {self.fleet.start(event)}"[:LOG_LINE_CHARS])

    def on_episodes_cancel(self, event: dict[str, Any]) -> None:
        self.fleet.cancel(int(event["request"]))

    def _base_checkpoint(self) -> Checkpoint | None:
        ident = self.run.config.get("model", {}).get("checkpoint")
        return Checkpoint.objects.filter(pk=ident).first() if isinstance(ident, int) else None

    def line(self, source: str, text: str) -> None:
        event = None
        if source == "out" and text.startswith("{"):
            try:
                event = json.loads(text)
            except ValueError:
                event = None
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            self.tail.append(text[:LOG_LINE_CHARS])
            return
        handler = getattr(self, f"on_{event['event']}", None)
        if handler is None:
            self.tail.append(text[:LOG_LINE_CHARS])
            return
        try:
            handler(event)
        except (TypeError, ValueError, KeyError) as exc:
            self.tail.append(f"[crucible] ignored a malformed {event['event']} event: {exc}"[:LOG_LINE_CHARS])

    def _step(self, event: dict[str, Any]) -> int:
        step = event.get("step", 0)
        return int(step) if isinstance(step, int | float) and step >= 0 else 0

    def on_metric(self, event: dict[str, Any]) -> None:
        values = _finite_numbers(event.get("values"))
        step = self._step(event)
        minutes = (time.monotonic() - self.started) / 60
        if "steps_per_min" not in values and minutes > 0 and step > self.first_step:
            values["steps_per_min"] = round((step - self.first_step) / minutes, 3)
        self.metrics.update(values)

        def record_metric() -> None:
            RunMetric.objects.create(run=self.run, step=step, values=values)
            publish_on_commit(self.group, {"kind": "metric", "run_id": self.run.pk, "step": step, "values": values})

        try:
            # Fenced: a launcher whose run was declared lost or cancelled records nothing more.
            states.write(self.lease, record_metric, metrics=self.metrics)
        except states.Superseded:
            logger.info("training run %s: a metric after the run stopped being ours was dropped", self.run.pk)

    def on_learned(self, event: dict[str, Any]) -> None:
        """The loss on the first rows of the run's own data before and after it trained: kept with its metrics."""
        values = _finite_numbers({key: event.get(key) for key in ("loss_before", "loss_after", "rows")})
        if {"loss_before", "loss_after"} - values.keys():
            raise ValueError("a learned event needs loss_before and loss_after")
        self.metrics.update({f"held_in_{key}": value for key, value in values.items()})
        try:
            states.write(self.lease, metrics=self.metrics)
        except states.Superseded:
            logger.info("training run %s: a learned event after the run stopped being ours was dropped", self.run.pk)

    def on_checkpoint(self, event: dict[str, Any]) -> None:
        path = Path(str(event["path"]))
        if not path.is_absolute() or not path.is_dir():
            raise ValueError(f"checkpoint path {str(path)[:300]!r} is not a directory")
        kind = event.get("kind", CheckpointKind.POLICY)
        kind = kind if kind in set(CheckpointKind) else CheckpointKind.POLICY
        step = self._step(event)
        metrics = {**self.metrics, **_finite_numbers(event.get("metrics"))}
        run = self.run
        with transaction.atomic():
            checkpoint = Checkpoint.objects.create(
                name=f"{(run.name or run.kind)[:150]} · run {run.pk} step {step}",
                kind=kind,
                path=str(path),
                run=run,
                parent=self.parent,
                base_model=str(run.config.get("model", {}).get("base_model", ""))[:500],
                step=step,
                config_hash=run.config_hash,
                dataset=run.dataset[:200],
                dataset_hash=run.dataset_hash,
                code_version=code_version(),
                metrics=metrics,
            )
            publish_on_commit(
                self.group,
                {"kind": "checkpoint", "run_id": run.pk, "id": checkpoint.pk, "step": step, "path": checkpoint.path},
            )
        try:
            # After the commit: the row exists (its id names the objects) but no host fetches it
            # until the upload is complete and its manifest hash is recorded.
            publish_checkpoint(checkpoint)
        except (StoreError, CheckpointStoreError, OSError) as exc:
            # The run goes on: the checkpoint is still usable on this host, and resumable.
            logger.exception("checkpoint %s of run %s: upload to the object store failed", checkpoint.pk, run.pk)
            self.tail.append(f"[crucible] checkpoint {checkpoint.pk} not uploaded: {exc}"[:LOG_LINE_CHARS])
        # Evaluation during training, where the run asks for it (training.checkpoint_listeners).
        for line in checkpoint_saved(checkpoint):
            self.tail.append(f"[crucible] {line}"[:LOG_LINE_CHARS])

    def on_rollout(self, event: dict[str, Any]) -> None:
        """A GRPO generation and its reward, kept as a trajectory of the run, written by the import's
        writer (checked, bounded, redacted). Not verified: the reward service has not scored it,
        so no training set takes it as is; the trainer's reward is kept as its reward."""
        if event.get("episodes") == "fleet":
            self.on_fleet_episode(event)
            return
        task_id = str(event.get("task_id", ""))
        task = Task.objects.filter(task_id=task_id).select_related("suite").first()
        raw_steps = event.get("steps")
        steps = [_rollout_step(raw) for raw in (raw_steps if isinstance(raw_steps, list) else [])]
        reward, resolved, flags = event.get("reward"), event.get("resolved"), event.get("flags")
        outcome: ClaimedOutcome = {
            "final_reward": float(reward) if isinstance(reward, int | float) and math.isfinite(reward) else None,
            "success": resolved if isinstance(resolved, bool) else None,
            # The trainer's scorer's flags: evidence, not yet the reward service's verdict.
            "flags": flags if isinstance(flags, list) else [],
        }
        record = {
            "trajectory_id": str(uuid.uuid4()),
            "task_id": task_id,
            "task_version": task.version if task else "",
            "prompt": task.statement if task else "",
            "policy": {"kind": PolicyKind.HF, "model": self.run.config.get("model", {}).get("base_model", "")},
            "patch": str(event.get("patch") or ""),
            "termination": Termination.SUBMITTED,
            "source": TrajectorySource.ONLINE,
            "claimed": outcome,
            "steps": [step for step in steps if step is not None][:MAX_ROLLOUT_STEPS],
            # Not of the interchange shape: kept in the trajectory's extra.
            "training_run": self.run.pk,
            "step": self._step(event),
            "mode": str(event.get("mode") or "")[:32],
            "completion": str(event.get("completion") or ""),
            "breakdown": event.get("breakdown") if isinstance(event.get("breakdown"), dict) else {},
        }
        try:
            # Fenced like the metrics: a launcher whose run was declared lost or cancelled records nothing more.
            states.write(self.lease, lambda: store_trajectory(record, f"training run {self.run.pk}", verified=outcome))
        except states.Superseded:
            logger.info("training run %s: a rollout after the run stopped being ours was dropped", self.run.pk)

    def on_fleet_episode(self, event: dict[str, Any]) -> None:
        try:
            # Fenced like the metrics: a launcher whose run was declared lost or cancelled records nothing more.
            states.write(self.lease, lambda: fleet_episodes.link(self.run.pk, self._step(event), event))
        except states.Superseded:
            logger.info("training run %s: a fleet episode after the run stopped being ours was dropped", self.run.pk)

    def on_done(self, event: dict[str, Any]) -> None:
        self.done_status = str(event.get("status", ""))
        self.done_error = str(event.get("error") or "")[:1000]

    def log_tail(self) -> str:
        return "\n".join(self.tail)


def _claim(run_pk: int) -> tuple[TrainingRun, states.Lease] | None:
    # A job delivered again after its worker died finds the row running under that worker:
    # that run is failed-and-resumable (by a person's choice), not silently started over.
    fail_lost_runs(TrainingRun.objects.filter(pk=run_pk))
    with transaction.atomic():
        lease = states.claim(
            TrainingRun,
            run_pk,
            stale_after=None,
            where=Q(status=RunStatus.QUEUED),
            worker=worker_name(),
            started_at=Coalesce(F("started_at"), Now()),
        )
        if lease is None:
            return None
        run = TrainingRun.objects.select_related("resume_from").get(pk=run_pk)
        publish_status(run)
    return run, lease


def execute(run_pk: int) -> TrainingRun | None:
    """Run a queued run to its end; None when it was not this call's to run."""
    claimed = _claim(run_pk)
    if claimed is None:
        return None
    run, lease = claimed
    follower = RunFollower(run, lease)
    try:
        return _run_trainer(run, follower)
    except Exception as exc:
        # Never leave the row running behind a launcher that gave up.
        logger.exception("training run %s: the launcher failed", run.pk)
        _finish(run, follower, RunStatus.FAILED, f"launcher error: {type(exc).__name__}: {str(exc)[:300]}")
        raise


def _localize_base_model(directory: Path) -> None:
    """Point the trainer at a local copy of a base checkpoint (or resume point) saved on another host."""
    config_file = directory / "config.json"
    try:
        config = json.loads(config_file.read_text())
        base = str(config["model"]["base_model"])
    except (OSError, ValueError, KeyError, TypeError):
        return  # the trainer reports a config it cannot read, as before
    checkpoint = checkpoint_for_model(base) if not Path(base).is_dir() else None
    if checkpoint is None:
        return
    config["model"]["base_model"] = str(local_checkpoint(checkpoint))
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True))


def _memory_events() -> Path | None:
    """This process's cgroup (v2) memory.events, where the kernel counts the processes it killed for memory."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        if line.startswith("0::"):
            found = Path("/sys/fs/cgroup") / line[3:].lstrip("/") / "memory.events"
            if found.is_file():
                return found
    fallback = Path("/sys/fs/cgroup/memory.events")
    return fallback if fallback.is_file() else None


def oom_kills() -> int | None:
    """The cgroup's oom_kill count, or None where it cannot be read."""
    path = _memory_events()
    try:
        text = path.read_text() if path is not None else ""
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def killed_error(code: int, tail: list[str], kills_before: int | None, kills_after: int | None) -> str:
    """What a trainer that SIGKILL ended is told ("" when it was not): it did not fail, it was stopped,
    almost always by the OOM killer, and what it left in its log says nothing of that."""
    if code != -signal.SIGKILL and not any(SIGKILLED in line for line in tail[-20:]):
        return ""
    evidence = ""
    if kills_before is not None and kills_after is not None and kills_after > kills_before:
        evidence = f" (the kernel counted {kills_after - kills_before} OOM kill(s) in this cgroup's memory.events)"
    return OUT_OF_MEMORY.format(evidence=evidence)


def _run_trainer(run: TrainingRun, follower: RunFollower) -> TrainingRun:
    try:
        directory = stage_run_inputs(run)
    except (RunError, StoreError, OSError) as exc:
        return _finish(run, follower, RunStatus.FAILED, f"could not stage the run's inputs on this host: {exc}")
    try:
        _localize_base_model(directory)
    except (StoreError, CheckpointStoreError, OSError) as exc:
        return _finish(run, follower, RunStatus.FAILED, f"could not fetch the base checkpoint: {exc}")
    follower.fleet.directory = directory / "fleet"
    try:
        command = trainer_command(directory, run_processes(run.config))
    except ResourcesError as exc:
        return _finish(run, follower, RunStatus.FAILED, str(exc))
    started = time.monotonic()
    kills_before = oom_kills()
    logger.info("training run %s started on %s: %s", run.pk, run.worker, " ".join(command))
    try:
        proc = subprocess.Popen(  # noqa: S603  (our own trainer module on our own run directory)
            command,
            cwd=settings.BASE_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            # Its own process group: cancel stops accelerate and every process it started.
            start_new_session=True,
            env={**trainer_environment(), fleet_episodes.FLEET_DIR_ENV: str(follower.fleet.directory)},
        )
    except OSError as exc:
        return _finish(run, follower, RunStatus.FAILED, f"could not start the trainer: {exc}")
    TrainingRun.objects.filter(pk=run.pk).update(pgid=proc.pid)
    try:
        stopped = _follow(run, proc, follower)
    finally:
        follower.fleet.stop()
    code = proc.wait()
    logger.info("training run %s trainer exited with %s after %.1f s", run.pk, code, time.monotonic() - started)
    if stopped:
        return TrainingRun.objects.get(pk=run.pk)
    if code == 0 and follower.done_status in ("", RunStatus.SUCCEEDED):
        return _finish(run, follower, RunStatus.SUCCEEDED, "")
    killed = killed_error(code, list(follower.tail), kills_before, oom_kills())
    if killed:
        logger.warning("training run %s: %s", run.pk, killed)
        return _finish(run, follower, RunStatus.FAILED, killed)
    last = follower.done_error or next((line for line in reversed(follower.tail) if line.strip()), "")
    return _finish(run, follower, RunStatus.FAILED, f"trainer exited with code {code}: {last[:300]}")


def _follow(run: TrainingRun, proc: subprocess.Popen[bytes], follower: RunFollower) -> bool:
    """Read both streams to their end; True when the row stopped being ours (cancelled, or
    declared lost) and the trainer's group was stopped for that."""
    lines: queue.Queue[Any] = queue.Queue()
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(target=_pump, args=(proc.stdout, "out", lines), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, "err", lines), daemon=True),
    ]
    for reader in readers:
        reader.start()
    open_streams, last_beat, stopped = 2, time.monotonic(), False
    exited_at: float | None = None
    while open_streams:
        try:
            source, text = lines.get(timeout=min(HEARTBEAT_SECONDS, DRAIN_SECONDS))
        except queue.Empty:
            source, text = "", None
        if text is EOF:
            open_streams -= 1
        elif text is not None:
            follower.line(source, text)
        if follower.fleet.pending:
            follower.tail.extend(f"[crucible] {notice}"[:LOG_LINE_CHARS] for notice in follower.fleet.tick())
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
        if exited_at is not None and text is None and time.monotonic() - exited_at >= DRAIN_SECONDS:
            # The trainer is gone but something it started still holds its output open: what
            # it left behind belongs to no run, so it is stopped with it.
            stop_process_group(proc.pid, grace=DRAIN_SECONDS)
            break
        if not stopped and time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
            last_beat = time.monotonic()
            if not _beat(run, follower):
                stopped = True
                stop_process_group(proc.pid)
    if stopped:
        TrainingRun.objects.filter(pk=run.pk).update(log_tail=follower.log_tail(), pgid=None)
    return stopped


def _beat(run: TrainingRun, follower: RunFollower) -> bool:
    """Touch the heartbeat and keep the log tail; False when the row is no longer running under this attempt."""
    return states.beat(follower.lease, log_tail=follower.log_tail())


def _finish(run: TrainingRun, follower: RunFollower, status: RunStatus, error: str) -> TrainingRun:
    with transaction.atomic():
        # The log tail and the group always: what the trainer said is worth keeping, whoever ended the run.
        TrainingRun.objects.filter(pk=run.pk).update(log_tail=follower.log_tail(), pgid=None)
        # A cancel that landed while the trainer was finishing keeps its word.
        if states.end(follower.lease, status, error=error, finished_at=timezone.now()):
            publish_status(TrainingRun.objects.get(pk=run.pk))
    locked = TrainingRun.objects.get(pk=run.pk)
    logger.info("training run %s finished: %s %s", run.pk, locked.status, locked.error[:200])
    return locked
