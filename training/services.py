"""Verbs on training runs: create (validate, prepare data, enqueue), cancel, resume, fail the lost.

A run's row moves queued → running → succeeded | failed | cancelled. The `training.launcher`
moves it while its trainer subprocess lives; these verbs are what a person (page, API,
command) does to it, and what a page load does to a run whose worker died.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.db import transaction
from django.utils import timezone

from core import states
from core.audit import AuditAction, record
from core.live import group_name, publish_on_commit
from core.objectstore import StoreError
from core.storage import object_store, remote_storage, sha256_file
from core.sweep import SweepContext
from core.vocabulary import LiveGroup, PairSides, RunStatus
from sandbox.process import signal_group
from training import data
from training.config import RunConfig, check, config_hash, parse
from training.models import Checkpoint, TrainingRun

logger = logging.getLogger(__name__)

# A running job touches its row this often; a row untouched for STALE_AFTER has lost its worker.
HEARTBEAT_SECONDS = float(os.environ.get("CRUCIBLE_TRAINING_HEARTBEAT_S", "5"))
STALE_AFTER = timedelta(seconds=float(os.environ.get("CRUCIBLE_TRAINING_STALE_S", "120")))
CANCEL_GRACE_SECONDS = 10.0
FINISHED = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)

User = AbstractBaseUser | AnonymousUser | None


class RunError(ValueError):
    pass


def runs_root() -> Path:
    return Path(settings.VAR_DIR) / "training" / "runs"


def run_dir(run: TrainingRun) -> Path:
    return runs_root() / str(run.pk)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def live_group(run: TrainingRun | int) -> str:
    return group_name(LiveGroup.RUN, run.pk if isinstance(run, TrainingRun) else run)


def publish_status(run: TrainingRun) -> None:
    publish_on_commit(
        live_group(run), {"kind": "status", "status": run.status, "error": run.error[:500], "run_id": run.pk}
    )


def create_run(text_or_config: str | dict[str, Any], user: User = None, *, enqueue: bool = True) -> TrainingRun:
    """Check a config, write its run directory (config.json, train.jsonl) and queue the run.

    Raises training.config.ConfigError (one message per field) or RunError; on error nothing
    is left behind: no row, no directory.
    """
    raw = parse(text_or_config) if isinstance(text_or_config, str) else dict(text_or_config)
    checked = check(raw)
    with transaction.atomic():
        run = TrainingRun.objects.create(
            name=checked.name,
            kind=checked.kind,
            config=checked.config,
            config_hash=config_hash(checked.config),
            created_by=user if isinstance(user, AuthUser) and user.pk else None,
        )
        record(user, AuditAction.LAUNCH, run, kind="training", training_kind=checked.kind)
        directory = run_dir(run)
        try:
            sides = PairSides(checked.config["data"].get("pair_sides", PairSides.TURNS))
            train = data.prepare(
                checked.kind, directory, checked.training_set, checked.train_file, checked.comparison_set, sides
            )
        except (data.DataError, OSError) as exc:
            shutil.rmtree(directory, ignore_errors=True)
            raise RunError(f"data: {exc}") from None
        run.output_dir = str(directory / "output")
        run.dataset, run.dataset_hash = train.dataset, train.sha256
        # Rows the data refused (pairs whose sides render the same) are the run's first numbers:
        # the run page shows them beside what the trainer reports.
        run.metrics = {f"refused_{reason}": float(count) for reason, count in train.refused.items()}
        run.save(update_fields=["output_dir", "dataset", "dataset_hash", "metrics"])
        write_config(run, checked, train)
        try:
            publish_run_inputs(run)
        except (StoreError, OSError) as exc:
            shutil.rmtree(directory, ignore_errors=True)
            raise RunError(f"could not put the training data into the object store: {exc}") from None
        if enqueue:
            # The job must find the committed row.
            transaction.on_commit(lambda: enqueue_run(run.pk))
    logger.info(
        "training run %s (%s) created by user %s: %d rows of %s, refused %s",
        run.pk,
        run.kind,
        getattr(user, "pk", None),
        train.rows,
        train.dataset,
        train.refused or "none",
    )
    return run


def write_config(run: TrainingRun, checked: RunConfig | None = None, train: data.TrainData | None = None) -> Path:
    """`<run_dir>/config.json`: what the trainer subprocess reads (absolute paths, no database)."""
    directory = run_dir(run)
    config = dict(run.config)
    config["data"] = {**config.get("data", {}), "train_file": str(directory / "train.jsonl")}
    config["data"].pop("training_set", None)
    config["output_dir"] = run.output_dir
    config["run_id"] = run.pk
    if run.resume_from is not None:
        # The trainer goes on from the checkpoint: with its optimizer, schedule, RNG and data position
        # where it kept them, else from its weights for the steps left (training.trainers.resume).
        config["model"] = {**config["model"], "base_model": run.resume_from.path}
        config["resume"] = {"checkpoint_id": run.resume_from.pk, "step": run.resume_from.step}
    path = directory / "config.json"
    path.write_text(json.dumps(config, indent=2, sort_keys=True))
    return path


def run_inputs_key(run: TrainingRun) -> str:
    return f"training/runs/{run.pk}/train.jsonl"


def publish_run_inputs(run: TrainingRun) -> None:
    """With hosts sharing no disk, the training data goes to the object store for the GPU host to fetch."""
    if remote_storage():
        object_store().put_file(run_inputs_key(run), run_dir(run) / "train.jsonl")


def stage_run_inputs(run: TrainingRun) -> Path:
    """The run directory on this host, made here when the run was created on another one.

    A GPU worker does not share the web host's `var/`: it fetches the training data by key,
    checks it against the hash the row recorded when the data was written, and writes its own
    `config.json` with this host's paths. Nothing half-fetched is ever left as `train.jsonl`.
    """
    directory = run_dir(run)
    if (directory / "config.json").is_file():
        return directory
    if not remote_storage():
        raise RunError(f"run {run.pk}: {directory} is not on this host and no object store is configured")
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / "train.jsonl.partial"
    try:
        object_store().get_file(run_inputs_key(run), partial)
        if sha256_file(partial) != run.dataset_hash:
            raise RunError(f"run {run.pk}: the training data in the object store does not match its recorded hash")
        os.replace(partial, directory / "train.jsonl")
    finally:
        partial.unlink(missing_ok=True)
    run.output_dir = str(directory / "output")
    run.save(update_fields=["output_dir"])
    write_config(run)
    logger.info("training run %s: inputs fetched from the object store into %s", run.pk, directory)
    return directory


def enqueue_run(run_pk: int) -> None:
    from training.jobs import run_training_job

    run_training_job.delay(run_pk)


def _group_alive(pgid: int) -> bool:
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.info["pid"]) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def stop_process_group(pgid: int, grace: float = CANCEL_GRACE_SECONDS) -> None:
    """SIGTERM the whole group (accelerate and every trainer process under it), SIGKILL what is
    still there after `grace` seconds."""
    if not signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return
        time.sleep(0.1)
    logger.warning("process group %s outlived SIGTERM by %.0f s; killing it", pgid, grace)
    signal_group(pgid, signal.SIGKILL)


def _on_this_host(run: TrainingRun) -> bool:
    return bool(run.worker) and run.worker.rsplit(":", 1)[0] == socket.gethostname()


def _stop_local_group(run: TrainingRun, grace: float) -> None:
    # A pgid means something only on the host that recorded it; elsewhere the job's own loop
    # sees the row change and stops its group.
    if run.pgid and _on_this_host(run):
        stop_process_group(run.pgid, grace)


def cancel_run(run: TrainingRun, user: User = None, grace: float = CANCEL_GRACE_SECONDS) -> TrainingRun:
    who = getattr(user, "username", "") or "someone"
    with transaction.atomic():
        locked = TrainingRun.objects.select_for_update().get(pk=run.pk)
        if not states.transition(locked, states.CANCELLED, error=f"cancelled by {who}", finished_at=timezone.now()):
            raise RunError(f"run {run.pk} is already {locked.status}")
        record(user, AuditAction.CANCEL, locked, kind="training")
        publish_status(locked)
    _stop_local_group(locked, grace)
    logger.info("training run %s cancelled by %s", run.pk, who)
    return locked


def last_checkpoint(run: TrainingRun) -> Checkpoint | None:
    return run.checkpoints.order_by("-step", "-id").first()


def is_resumable(run: TrainingRun) -> bool:
    return run.status == RunStatus.FAILED and run.checkpoints.exists()


def resume_run(run: TrainingRun, user: User = None, *, enqueue: bool = True) -> TrainingRun:
    """Queue a failed run again from its last checkpoint, for the steps it had left."""
    with transaction.atomic():
        locked = TrainingRun.objects.select_for_update().get(pk=run.pk)
        checkpoint = last_checkpoint(locked)
        if locked.status != RunStatus.FAILED or checkpoint is None:
            raise RunError(f"run {run.pk} is {locked.status} with no checkpoint to resume from")
        states.transition(
            locked,
            states.QUEUED,
            only_from=[states.FAILED],
            resume_from=checkpoint,
            error="",
            pgid=None,
            worker="",
            heartbeat_at=None,
            finished_at=None,
        )
        write_config(locked)
        record(user, AuditAction.RESUME, locked, kind="training", checkpoint=checkpoint.pk, step=checkpoint.step)
        publish_status(locked)
        if enqueue:
            transaction.on_commit(lambda: enqueue_run(locked.pk))
    logger.info(
        "training run %s resumed from checkpoint %s (step %s) by user %s",
        run.pk,
        checkpoint.pk,
        checkpoint.step,
        getattr(user, "pk", None),
    )
    return locked


def _process_gone(run: TrainingRun) -> bool:
    """Its worker was on this host and its process is no longer there: it is gone before it goes stale."""
    if not _on_this_host(run):
        return False
    pid = run.worker.rsplit(":", 1)[1]
    return pid.isdigit() and not psutil.pid_exists(int(pid))


def fail_lost_runs(runs: Any = None) -> list[int]:
    """Running rows whose worker is gone (beats stopped, or a dead process on this host) become
    failed, and resumable from their last checkpoint; their trainer, if still here, is stopped.
    Called by the sweep, on page loads, at job start and while a command waits: never "running" forever."""
    candidates = (runs if runs is not None else TrainingRun.objects).filter(status=RunStatus.RUNNING)
    stale = set(candidates.filter(states.stale(STALE_AFTER.total_seconds())).values_list("pk", flat=True))
    failed: list[int] = []
    for run in candidates.only("pk", "worker", "heartbeat_at", "pgid", "status", "attempt"):
        if run.pk in stale or _process_gone(run):
            if mark_lost(run, f"worker {run.worker or '?'} stopped answering"):
                failed.append(run.pk)
    return failed


def mark_lost(run: TrainingRun, why: str) -> bool:
    """The run's attempt is over: failed, and resumable when it left a checkpoint. False when it had moved on."""
    with transaction.atomic():
        locked = TrainingRun.objects.select_for_update().get(pk=run.pk)
        resumable = locked.checkpoints.exists()
        error = f"{why}; " + ("resumable from its last checkpoint" if resumable else "no checkpoint to resume from")
        # Fenced by the attempt that was seen lost: one that claimed the row since is left alone.
        lease = states.Lease(TrainingRun, run.pk, run.attempt)
        if not states.end(lease, states.FAILED, locked, error=error, finished_at=timezone.now()):
            return False
        publish_status(locked)
    _stop_local_group(locked, grace=2.0)
    logger.warning("training run %s failed: %s", run.pk, locked.error)
    return True


def lost_training_runs(context: SweepContext) -> int:
    """The sweep's part: runs whose worker is gone are failed (resumable); queued runs whose job the
    broker lost are sent again (a job that finds its run no longer queued does nothing)."""
    from training.jobs import run_training_job

    redone = len(fail_lost_runs())
    held = context.broker.job_args(run_training_job.name)
    if held is not None:
        queued = {args[0] for args in held if args}
        cutoff = timezone.now() - timedelta(seconds=context.lost_after)
        for pk in TrainingRun.objects.filter(status=RunStatus.QUEUED, created_at__lt=cutoff).values_list(
            "pk", flat=True
        ):
            if pk not in queued:
                enqueue_run(pk)
                redone += 1
    return redone
