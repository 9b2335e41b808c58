"""Verifying many trajectories at once: claimed rewards turned into verified ones, in bulk.

A pipeline that imports 10,000 SWE-agent or OpenHands trajectories has rewards it cannot trust
(what a file says of its own outcome is `claimed`). A scoring run puts each through the reward
service (rewards.services.score_trajectory): the `score` command runs one in its own process, the
API queues one for a `rewards` worker. Either way it is a row with a lease (core.states), so a run
whose worker died is taken back by the sweep and finished elsewhere; scoring is idempotent per
(trajectory, spec version), so nothing is scored twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

import yaml
from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import QuerySet
from django.utils import timezone

from core import states
from core.audit import AuditAction, record
from core.vocabulary import TrajectorySource, TrajectoryStatus
from rewards.models import Reward, ScoringRun
from rewards.scoring import Score
from rewards.services import RewardError, VerdictKey, active_spec, record_scoring_failure, score_trajectory
from rewards.spec import RewardSpec, SpecError, parse_spec
from trajectories.models import Trajectory
from trajectories.queries import TrajectoryFilter

logger = logging.getLogger(__name__)

# Filters a scoring run takes besides the trajectory list's own.
IMPORTED = "imported"  # only trajectories imported from files
EXTRA_FILTERS = frozenset({IMPORTED})
SPEC_TEXT_MAX = 64 * 1024
PROGRESS_EVERY_S = 1.0  # the row's counts are written at most this often (and at the end)
JOBS_MAX = 16


class ScoringRunError(ValueError):
    pass


def stale_after() -> float:
    return float(settings.CRUCIBLE_STALE_S)


def known_filters() -> list[str]:
    return sorted({*TrajectoryFilter.base_filters, *EXTRA_FILTERS})


def covered(filters: dict[str, Any]) -> QuerySet[Trajectory]:
    """The trajectories a run over `filters` scores: those of the list's filters that ran to an end.

    Unknown or malformed filters are refused, naming the parameter: a typo must not turn a run over
    one batch into a run over everything.
    """
    unknown = sorted(set(filters) - set(known_filters()))
    if unknown:
        raise ScoringRunError(f"unknown filter {unknown[0]!r}; filters: {', '.join(known_filters())}")
    params = {key: str(value) for key, value in filters.items() if key not in EXTRA_FILTERS}
    found = TrajectoryFilter(params, queryset=Trajectory.objects.all())
    if not found.is_valid():
        name, problems = next(iter(found.errors.items()))
        raise ScoringRunError(f"filter {name!r}: {' '.join(str(p) for p in problems)}")
    rows = found.qs.filter(status=TrajectoryStatus.FINISHED)
    if _truthy(filters.get(IMPORTED)):
        rows = rows.filter(source=TrajectorySource.IMPORTED)
    return rows.order_by("id")


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def spec_of(spec_text: str) -> RewardSpec:
    if not spec_text.strip():
        return active_spec()
    if len(spec_text) > SPEC_TEXT_MAX:
        raise ScoringRunError(f"the reward spec is longer than {SPEC_TEXT_MAX // 1024} KiB")
    try:
        return parse_spec(yaml.safe_load(spec_text))
    except yaml.YAMLError as exc:
        raise ScoringRunError(f"the reward spec is not YAML: {str(exc)[:200]}") from None
    except SpecError as exc:
        raise ScoringRunError(f"the reward spec: {exc}") from None


def start_scoring_run(
    filters: dict[str, Any], spec_text: str = "", user: Any = None, *, enqueue: bool = True
) -> ScoringRun:
    """Check the request, count what it covers and keep it as a queued row (for a worker when `enqueue`)."""
    try:
        spec = spec_of(spec_text)
    except RewardError as exc:
        raise ScoringRunError(str(exc)) from None
    total = covered(filters).count()
    with transaction.atomic():
        run = ScoringRun.objects.create(
            filters=filters,
            spec_text=spec_text,
            spec_version=spec.version,
            total=total,
            created_by=user if getattr(user, "pk", None) else None,
        )
        record(user, AuditAction.LAUNCH, run, kind="scoring", trajectories=total, spec=spec.version)
        if enqueue:
            transaction.on_commit(lambda: enqueue_scoring_run(run.pk))
    logger.info("scoring run %s created: %d trajectories under %s", run.pk, total, spec.version)
    return run


def enqueue_scoring_run(run_pk: int) -> None:
    from rewards.jobs import score_run_job

    score_run_job.delay(run_pk)


def run_scoring_run(
    run_pk: int, *, jobs: int = 1, on_progress: Callable[[ScoringRun], None] = lambda run: None
) -> ScoringRun | None:
    """Score every trajectory the run covers that its spec has not scored yet; None if not ours to run.

    `jobs` trajectories are scored side by side (each one's tests run in a sandbox of their own).
    The same patch of the same task is judged once per run (rewards.services.score_trajectory's
    verdict memo): imported sets repeat patches (empty ones above all).
    """
    lease = states.claim(ScoringRun, run_pk, stale_after=stale_after(), started_at=timezone.now())
    if lease is None:
        return None
    run = ScoringRun.objects.get(pk=run_pk)
    try:
        spec = spec_of(run.spec_text)
        rows = covered(run.filters)
    except (ScoringRunError, RewardError) as exc:
        states.end(lease, states.FAILED, run, error=str(exc)[:2000], finished_at=timezone.now())
        return run
    counts = {"total": rows.count(), "done": 0, "scored": 0, "skipped": 0, "failed": 0}
    verdicts: dict[VerdictKey, Score] = {}
    lock = threading.Lock()
    last_write = 0.0

    def tally(outcome: str) -> None:
        nonlocal last_write
        with lock:
            counts["done"] += 1
            counts[outcome] += 1
            due = time.monotonic() - last_write >= PROGRESS_EVERY_S
            if due:
                last_write = time.monotonic()
                snapshot = dict(counts)
        if due:
            states.write(lease, **snapshot)
            _show(run, snapshot, on_progress)

    with states.Heartbeat(lease, stale_after() / 4):
        try:
            for outcome in _score_all(rows, spec, verdicts, max(1, min(jobs, JOBS_MAX))):
                tally(outcome)
        except states.Superseded:
            logger.warning("scoring run %s: attempt %d was superseded; it stops", run_pk, lease.attempt)
            return None
    states.write(lease, **counts)
    states.end(lease, states.SUCCEEDED, run, finished_at=timezone.now(), **counts)
    _show(run, counts, on_progress)
    logger.info(
        "scoring run %s finished: %d scored, %d already scored, %d failed of %d",
        run_pk,
        counts["scored"],
        counts["skipped"],
        counts["failed"],
        counts["total"],
    )
    return run


def _show(run: ScoringRun, counts: dict[str, int], on_progress: Callable[[ScoringRun], None]) -> None:
    for name, value in counts.items():
        setattr(run, name, value)
    on_progress(run)


def _score_all(
    rows: QuerySet[Trajectory], spec: RewardSpec, verdicts: dict[VerdictKey, Score], jobs: int
) -> Iterator[str]:
    """Each covered trajectory's outcome: scored, skipped (scored under the spec already) or failed."""
    done = set(
        Reward.objects.filter(spec_version=spec.version, trajectory__in=rows).values_list("trajectory_id", flat=True)
    )
    todo = rows.values_list("pk", "trajectory_id")
    if jobs == 1:
        for pk, trajectory_id in todo.iterator():
            yield "skipped" if pk in done else _score_one(str(trajectory_id), spec, verdicts)
        return
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="scoring") as pool:
        running: set[Future[str]] = set()
        for pk, trajectory_id in todo.iterator():
            if pk in done:
                yield "skipped"
                continue
            running.add(pool.submit(_score_in_thread, str(trajectory_id), spec, verdicts))
            if len(running) >= jobs * 2:
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                yield from (f.result() for f in finished)
        for future in running:
            yield future.result()


def _score_in_thread(trajectory_id: str, spec: RewardSpec, verdicts: dict[VerdictKey, Score]) -> str:
    try:
        return _score_one(trajectory_id, spec, verdicts)
    finally:
        close_old_connections()


def _score_one(trajectory_id: str, spec: RewardSpec, verdicts: dict[VerdictKey, Score]) -> str:
    try:
        score_trajectory(trajectory_id, spec, verdicts=verdicts)
    except Exception as exc:  # noqa: BLE001 - one trajectory that cannot be scored says nothing of the others
        logger.warning("scoring of %s failed: %s", trajectory_id, exc)
        record_scoring_failure(trajectory_id, spec.version, f"{type(exc).__name__}: {exc}")
        return "failed"
    return "scored"
