"""A troubleshooting table for RL training, each row bound to a live signal (docs/training.md "Health").

A row is a symptom, its likely cause, how to check, and the suggested fix; the fix is
shown when the signal crosses the row's threshold. Signals read recent data only (the last
RECENT trajectories, the latest runs), so the page stays cheap on a large database.
"""

from __future__ import annotations

import logging
import statistics
from pathlib import Path
from typing import Any, TypedDict, cast

from django.conf import settings
from django.db import connection
from django.db.models import Avg

from core.vocabulary import Detector, JobQueue, TrajectoryStatus, ValidationStatus
from evaluation.diagnosis import ROWS, Code, diagnose
from evaluation.queries import reward_vs_pass_series
from tasks.models import Task
from training.models import RunMetric, TrainingRun
from trajectories.models import Trajectory
from trajectories.queries import flagged_with

logger = logging.getLogger(__name__)

RECENT = 500  # trajectories a rate is computed over
RUNS = 10  # latest training runs whose curves are read
DUPLICATE_RATE_MAX = 0.3
KL_SPIKE_FACTOR = 3.0  # a kl value this many times the run's median is a spike
KL_SPIKE_MIN = 0.1  # ... and at least this large in absolute terms
STARTUP_MS_MAX = 1000.0  # "the sampling client times out often": slow sandbox start-up
OVERFIT_RATIO = 1.5  # eval_loss / loss
LOG_BYTES_MAX = 1 << 30
DB_BYTES_MAX = 20 << 30
QUEUE_DEPTH_MAX = 100
PING_TIMEOUT = 0.5


class Row(TypedDict):
    key: str
    symptom: str
    cause: str
    check: str
    fix: str
    value: str
    threshold: str
    alert: bool
    evidence: str  # a URL path or ""


def _row(*fields: str | bool) -> Row:
    """A row from its fields in table order: key, symptom, cause, check, fix, value, threshold, alert[, evidence]."""
    names = ("key", "symptom", "cause", "check", "fix", "value", "threshold", "alert", "evidence")
    row = dict(zip(names, (*fields, "") if len(fields) == len(names) - 1 else fields, strict=True))
    return cast(Row, row)


def _recent() -> list[dict[str, Any]]:
    rows = (
        Trajectory.objects.filter(status=TrajectoryStatus.FINISHED)
        .order_by("-created_at", "-id")
        .values("duplicate_rate", "sandbox", "flags")[:RECENT]
    )
    return [dict(r) for r in rows]


def _diagnosed_runs() -> dict[Code, list[int]]:
    """Each shape of the reward-vs-pass@k table -> the latest runs diagnosed with it."""
    runs: dict[Code, list[int]] = {code: [] for code in ROWS}
    for run in TrainingRun.objects.order_by("-created_at", "-id")[:RUNS]:
        reward, points = reward_vs_pass_series(run)
        for diagnosis in diagnose(reward, points):
            runs[diagnosis.code].append(run.pk)
    return runs


def _runs_value(runs: list[int]) -> str:
    return ", ".join(f"run {pk}" for pk in runs) if runs else f"none of the latest {RUNS} runs"


def reward_gamed_row(gamed: list[int]) -> Row:
    test_edits = Trajectory.objects.filter(flagged_with(Detector.PROTECTED_PATH_EDIT)).count()
    return _row(
        "reward_gamed",
        "reward rises fast but eval scores do not",
        "the reward is being gamed (tests can be modified)",
        "look for test-file changes in trajectories",
        "make test files read-only and add the anti-cheat check",
        f"{len(gamed)} run(s) with reward up / pass@k flat beyond noise ({_runs_value(gamed)}); "
        f"{test_edits} trajectories edited protected paths",
        "any run",
        bool(gamed),
        f"/evaluation/training-runs/{gamed[0]}/" if gamed else "/trajectories/?flag=protected_path_edit",
    )


def diagnosis_rows() -> list[Row]:
    """Every row of the reward-vs-pass@k table, not only gaming: each lists the runs it matches."""
    diagnosed = _diagnosed_runs()
    rows = [reward_gamed_row(diagnosed["reward_gamed"])]
    for code, (symptom, cause, action, _evidence) in ROWS.items():
        if code == "reward_gamed":
            continue
        runs = diagnosed[code]
        rows.append(
            _row(
                code,
                symptom,
                cause,
                "the training reward curve beside pass@k of the run's evaluated checkpoints, within their intervals",
                action,
                _runs_value(runs),
                "any run",
                bool(runs),
                f"/evaluation/training-runs/{runs[0]}/" if runs else "",
            )
        )
    return rows


def duplicate_row(recent: list[dict[str, Any]]) -> Row:
    rate = statistics.fmean(r["duplicate_rate"] for r in recent) if recent else 0.0
    return _row(
        "duplicates",
        "the agent runs many repeated commands",
        "no penalty for repeated actions",
        "the step de-duplication rate of trajectories",
        "add a repeated-action penalty to the reward function",
        f"{rate:.0%} of steps repeat an earlier one (last {len(recent)} trajectories)",
        f"> {DUPLICATE_RATE_MAX:.0%}",
        rate > DUPLICATE_RATE_MAX,
        "/trajectories/",
    )


def kl_row() -> Row:
    spikes: list[str] = []
    for run in TrainingRun.objects.order_by("-created_at", "-id")[:RUNS]:
        kl = [
            float(v["kl"])
            for v in RunMetric.objects.filter(run=run).order_by("step").values_list("values", flat=True)
            if isinstance(v, dict) and isinstance(v.get("kl"), int | float)
        ]
        if len(kl) >= 3:
            median = statistics.median(kl)
            peak = max(kl)
            if peak >= KL_SPIKE_MIN and peak > KL_SPIKE_FACTOR * max(median, 1e-9):
                spikes.append(f"run {run.pk}: kl {peak:.3g} vs median {median:.3g}")
    return _row(
        "kl_spikes",
        "training is unstable, the loss jumps",
        "KL weight too small or learning rate too high",
        "the KL divergence curve",
        "raise kl_coef, lower the learning rate",
        "; ".join(spikes) or "no spikes",
        f"kl > {KL_SPIKE_FACTOR:g}x the run's median",
        bool(spikes),
    )


def startup_row(recent: list[dict[str, Any]]) -> Row:
    times = [
        float(r["sandbox"]["startup_ms"])
        for r in recent
        if isinstance(r["sandbox"], dict) and isinstance(r["sandbox"].get("startup_ms"), int | float)
    ]
    avg = statistics.fmean(times) if times else None
    return _row(
        "sandbox_startup",
        "the sampling client times out often",
        "slow sandbox start-up or dependency installation",
        "the average sandbox start-up time",
        "pre-build images, reuse containers",
        f"{avg:.1f} ms average (last {len(times)} trajectories)" if avg is not None else "no rollouts yet",
        f"> {STARTUP_MS_MAX:g} ms",
        avg is not None and avg > STARTUP_MS_MAX,
    )


def overfit_row() -> Row:
    worst = ""
    for run in TrainingRun.objects.order_by("-created_at", "-id")[:RUNS]:
        latest = run.metrics if isinstance(run.metrics, dict) else {}
        loss, eval_loss = latest.get("loss"), latest.get("eval_loss")
        if isinstance(loss, int | float) and isinstance(eval_loss, int | float) and loss > 0:
            if eval_loss / loss > OVERFIT_RATIO:
                worst = worst or f"run {run.pk}: eval_loss {eval_loss:.3g} vs loss {loss:.3g}"
    return _row(
        "overfitting",
        "the data set is small and the model overfits",
        "too little data, too little variety",
        "the gap between training and validation loss",
        "add synthetic tasks or use a smaller model",
        worst or "no gap",
        f"eval_loss > {OVERFIT_RATIO:g}x loss",
        bool(worst),
    )


def flaky_row() -> Row:
    flaky = Task.objects.filter(validation_status=ValidationStatus.FLAKY).count()
    return _row(
        "flaky_tasks",
        "a task's own tests are unstable",
        "dependency version drift or random tests",
        "run the tests several times (validate_tasks --runs 5)",
        "pin dependency versions, drop the unstable tests (quarantine)",
        f"{flaky} task(s) quarantined as flaky",
        "> 0",
        flaky > 0,
        "/tasks/",
    )


def _queue_depths() -> dict[str, int | None]:
    """Jobs waiting on each queue of this instance: its lists under the instance's key prefix,
    every priority step counted (core.queue_waits, one round trip each, as the queued pages read it)."""
    from core.queue_waits import queue_wait

    return {queue.value: queue_wait(queue.value).jobs_waiting for queue in JobQueue}


def _workers() -> list[str] | None:
    from celery import current_app

    try:
        replies = current_app.control.ping(timeout=PING_TIMEOUT)
    except Exception as exc:  # a broker that is down must not take the health page with it
        logger.warning("health: worker ping failed: %s", exc)
        return None
    return sorted(name for reply in replies for name in reply)


def queue_row() -> Row:
    depths = _queue_depths()
    workers = _workers()
    waiting = sum(d for d in depths.values() if d)
    alert = waiting > QUEUE_DEPTH_MAX or (waiting > 0 and not workers)
    shown = ", ".join(f"{q} {'?' if d is None else d}" for q, d in depths.items())
    alive = "unknown" if workers is None else (", ".join(workers) or "none answering")
    return _row(
        "queues",
        "background services fight over ports / work piles up",
        "several processes grabbing the same port instead of sharing a queue",
        "queue depths and which workers answer",
        "use the distributed task queue (Celery workers on each queue), no fixed ports",
        f"queued: {shown}; workers: {alive}",
        f"> {QUEUE_DEPTH_MAX} queued, or work queued with no worker",
        alert,
    )


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def _db_bytes() -> int | None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return int(cursor.fetchone()[0])
    name = Path(str(connection.settings_dict["NAME"]))
    return name.stat().st_size if name.is_file() else None


def size_row() -> Row:
    logs = _dir_bytes(Path(settings.VAR_DIR) / "log")
    db = _db_bytes()
    longest = Trajectory.objects.aggregate(avg=Avg("step_count"))["avg"] or 0
    mib = 1 << 20
    return _row(
        "sizes",
        "log files grow too large",
        "trajectory records are not truncated",
        "the length of single trajectories; log and database sizes",
        "truncate command output, keep only the key actions",
        f"logs {logs / mib:.1f} MiB, database {'?' if db is None else f'{db / mib:.1f} MiB'}, "
        f"{longest:.1f} steps per trajectory on average",
        f"logs > {LOG_BYTES_MAX // mib} MiB or database > {DB_BYTES_MAX // mib} MiB",
        logs > LOG_BYTES_MAX or (db or 0) > DB_BYTES_MAX,
    )


def health_rows() -> list[Row]:
    recent = _recent()
    return [
        *diagnosis_rows(),
        duplicate_row(recent),
        kl_row(),
        startup_row(recent),
        overfit_row(),
        flaky_row(),
        queue_row(),
        size_row(),
    ]
