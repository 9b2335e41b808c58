"""The one owner of long work kept as a row: trajectories, rollout batches, validation runs,
training runs, evaluation runs and scoring runs.

Rows move `queued → running → succeeded | finished | failed | cancelled`. Workers, the web
server and commands race on the same rows (a cancel arrives while a worker finishes the last
trajectory; a redelivered job wakes up after its batch was cancelled), so every move is a
conditional UPDATE on the state the move is allowed from: whoever reaches a terminal state
first wins, and a late writer changes nothing instead of overwriting it.

A worker that runs a row holds a **lease** on it: `claim` moves the row to running under a new
`attempt` number, and every write the attempt makes afterwards (its progress, its heartbeat, its
end) is fenced by that number. A row is taken from its holder only when its beats stop
(`stale`), and the beats come from a thread of the running attempt (`Heartbeat`), whatever the
attempt is doing meanwhile (a model generation, a test run, waiting for a server): a step that
takes ten minutes is not a dead worker. A holder that was superseded (it was stopped for longer
than the stale window, another worker took the row) finds out at its next write, which raises
`Superseded` and writes nothing.

Terminal states are final for workers. Only a person's explicit resume (`reopen`) brings a
cancelled or failed row back to queued; nothing ever leaves succeeded or finished.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.db import DatabaseError, OperationalError, connection, models, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.vocabulary import RunStatus, TrajectoryStatus

logger = logging.getLogger(__name__)

QUEUED = RunStatus.QUEUED.value
RUNNING = RunStatus.RUNNING.value
SUCCEEDED = RunStatus.SUCCEEDED.value
FINISHED = TrajectoryStatus.FINISHED.value  # a trajectory's "succeeded": it ran to an end
FAILED = RunStatus.FAILED.value
CANCELLED = RunStatus.CANCELLED.value

# Where each state may go. Failed is not terminal for workers: a retry or a resume runs it again.
TRANSITIONS: dict[str, frozenset[str]] = {
    QUEUED: frozenset({RUNNING, CANCELLED, FAILED}),
    RUNNING: frozenset({SUCCEEDED, FINISHED, FAILED, CANCELLED}),
    FAILED: frozenset({QUEUED, RUNNING}),
    SUCCEEDED: frozenset(),
    FINISHED: frozenset(),
    CANCELLED: frozenset(),
}
TERMINAL = frozenset({SUCCEEDED, FINISHED, CANCELLED})
DONE = TERMINAL | {FAILED}  # nothing is running or waiting to run
# What a person's resume may bring back to queued.
REOPENABLE = frozenset({FAILED, CANCELLED})

# SQLite lets one writer in at a time; under load a writer can wait longer than its busy timeout
# (a big import holds the lock for its whole transaction). A lease's writes are retried this many
# times, backing off, before the error reaches anyone.
LOCKED_RETRIES = 8
LOCKED_BACKOFF_S = 0.25
T = TypeVar("T")


class StateError(ValueError):
    """A state that the row's model does not have."""


class Superseded(Exception):  # noqa: N818 - it names what happened to the attempt, not an error of its own
    """This attempt no longer holds its row: another attempt claimed it, or it was ended meanwhile
    (cancelled, declared lost). The holder stops its work and writes nothing more."""

    def __init__(self, lease: Lease) -> None:
        super().__init__(f"{lease.model.__name__} {lease.pk}: attempt {lease.attempt} was superseded")
        self.lease = lease


def can_move(current: str, new: str) -> bool:
    return new in TRANSITIONS.get(current, frozenset())


def sources(new: str) -> list[str]:
    """Every state from which `new` may be reached."""
    return sorted(state for state, targets in TRANSITIONS.items() if new in targets)


def _check(model: type[models.Model], field: str, new: str) -> None:
    declared = {value for value, _ in (getattr(model._meta.get_field(field), "choices", None) or [])}
    if declared and new not in declared:
        raise StateError(f"{model.__name__}.{field} has no state {new!r} ({', '.join(sorted(declared))})")


def transition(
    obj: models.Model,
    new: str,
    *,
    field: str = "status",
    only_from: Iterable[str] | None = None,
    match: Mapping[str, Any] | None = None,
    **also: Any,
) -> bool:
    """Move one row to `new` if the database says it may; True when it moved.

    The conditional UPDATE is the lock: two writers cannot both move the same row out of
    the same state, and a row already terminal stays as it is. `match` adds conditions.
    `also` are further fields written in the same UPDATE (finished_at, error, ...). The object
    is updated in memory when the row moved, and refreshed from the database when it did not.
    """
    model = type(obj)
    _check(model, field, new)
    allowed = set(sources(new))
    if only_from is not None:
        allowed &= set(only_from)
    rows = model._default_manager.filter(pk=obj.pk, **{f"{field}__in": allowed}, **(match or {}))
    moved = retry_locked(lambda: rows.update(**{field: new}, **also))
    if moved:
        setattr(obj, field, new)
        _set_in_memory(obj, also)
    else:
        obj.refresh_from_db(fields=[field])
        logger.debug("%s %s stays %s (asked to become %s)", model.__name__, obj.pk, getattr(obj, field), new)
    return bool(moved)


def transition_all(queryset: models.QuerySet[Any], new: str, *, field: str = "status", **also: Any) -> int:
    """Move every row of the queryset that may move to `new`; the number moved."""
    _check(queryset.model, field, new)
    return queryset.filter(**{f"{field}__in": sources(new)}).update(**{field: new}, **also)


def reopen(queryset: models.QuerySet[Any], *, field: str = "status", **also: Any) -> int:
    """A person's resume: cancelled or failed rows become queued again. The number reopened."""
    return queryset.filter(**{f"{field}__in": sorted(REOPENABLE)}).update(**{field: QUEUED}, **also)


def _set_in_memory(obj: models.Model, fields: Mapping[str, Any]) -> None:
    for name, value in fields.items():
        if not hasattr(value, "resolve_expression"):
            setattr(obj, name, value)


# --- leases: claim, beat, fence, end, lost ----------------------------------------------------


@dataclass(frozen=True)
class Lease:
    """One attempt's hold on a running row (the row's `attempt` when it was claimed)."""

    model: type[models.Model]
    pk: int
    attempt: int

    def rows(self) -> models.QuerySet[Any]:
        """The row, only while this attempt holds it: running, under this attempt."""
        return self.model._default_manager.filter(pk=self.pk, status=RUNNING, attempt=self.attempt)


def stale(stale_after: float, prefix: str = "") -> Q:
    """Running rows whose beats stopped `stale_after` seconds ago (or never came): their worker is gone.

    `prefix` reaches the rows through a relation (`"trajectory__"`).
    """
    cutoff = timezone.now() - timedelta(seconds=stale_after)
    return Q(**{f"{prefix}status": RUNNING}) & (
        Q(**{f"{prefix}heartbeat_at__lt": cutoff}) | Q(**{f"{prefix}heartbeat_at": None})
    )


def claimable(stale_after: float | None, also_from: Iterable[str] = ()) -> Q:
    """What a worker may take: queued or failed rows (and `also_from`), and running rows whose beats
    stopped (unless `stale_after` is None: a row whose worker died is then not taken over)."""
    waiting = Q(status__in=[*sources(RUNNING), *also_from])
    return waiting if stale_after is None else waiting | stale(stale_after)


def claim(
    model: type[models.Model],
    pk: int,
    *,
    stale_after: float | None,
    also_from: Iterable[str] = (),
    where: Q | None = None,
    on_claim: Callable[[Lease], None] | None = None,
    **also: Any,
) -> Lease | None:
    """Take the row for a new attempt; None when another attempt holds it (it still beats) or it is done.

    One conditional UPDATE is the lock: two workers given the same row (a redelivered message, a
    resume, a sweep) cannot both win, and a row that still beats is never taken, whoever asks.
    `stale_after` None takes no running row at all (a training run whose worker died is failed
    and resumed by a person, not restarted). `also_from` adds states it may be taken from;
    `where` narrows what may be taken (a cancelled batch's rows are not); `on_claim` runs in the
    same transaction as the claim (dropping a dead attempt's steps), so nothing the old attempt
    committed before the claim survives it, and nothing it tries after it lands.
    """
    eligible = claimable(stale_after, also_from) & (where if where is not None else Q())

    def take() -> Lease | None:
        with transaction.atomic():
            rows = model._default_manager.filter(Q(pk=pk) & eligible)
            if not rows.update(status=RUNNING, heartbeat_at=timezone.now(), attempt=F("attempt") + 1, **also):
                return None
            attempt = model._default_manager.filter(pk=pk).values_list("attempt", flat=True).get()
            lease = Lease(model, pk, attempt)
            if on_claim is not None:
                on_claim(lease)
            return lease

    return retry_locked(take)


def beat(lease: Lease, **also: Any) -> bool:
    """Tell everyone the attempt lives; False when it no longer holds the row."""
    return bool(retry_locked(lambda: lease.rows().update(heartbeat_at=timezone.now(), **also)))


def write(lease: Lease, work: Callable[[], T] | None = None, /, **fields: Any) -> T | None:
    """A fenced write: `fields` on the row (and a beat), then `work`, in one transaction; raises
    Superseded, writing nothing, when the attempt no longer holds the row.

    The fenced UPDATE comes first: on PostgreSQL it locks the row, so a claim waits for this
    transaction and its clean-up then removes what `work` wrote; on SQLite the writes are serial.
    """

    def fenced() -> T | None:
        with transaction.atomic():
            if not lease.rows().update(heartbeat_at=timezone.now(), **fields):
                raise Superseded(lease)
            return work() if work is not None else None

    return retry_locked(fenced)


def end(lease: Lease, new: str, obj: models.Model | None = None, **fields: Any) -> bool:
    """The attempt's last write: its row to `new` (a terminal state, or failed); False when superseded."""
    _check(lease.model, "status", new)
    moved = bool(retry_locked(lambda: lease.rows().update(status=new, **fields)))
    if moved and obj is not None:
        obj.status = new  # type: ignore[attr-defined]
        _set_in_memory(obj, fields)
    return moved


def take_back(queryset: models.QuerySet[Any], stale_after: float, new: str = QUEUED, **also: Any) -> list[int]:
    """Rows of the queryset whose beats stopped move to `new` (queued to run again, or failed): the
    primary keys moved. Each move re-checks staleness, so of two sweepers one moves a row, and a
    holder that beat meanwhile keeps it. Its attempt, waking later, finds itself superseded."""
    moved: list[int] = []
    for pk in list(queryset.filter(stale(stale_after)).values_list("pk", flat=True)):
        rows = queryset.model._default_manager.filter(Q(pk=pk) & stale(stale_after))
        # running -> queued is outside the usual moves, like a claim's running -> running: the worker is gone.
        if retry_locked(lambda rows=rows: rows.update(status=new, **also)):  # type: ignore[misc]
            moved.append(pk)
    return moved


def retry_locked(work: Callable[[], T]) -> T:
    """Run `work`, again after SQLite's "database is locked" (bounded, backing off).

    Only outside a transaction: inside one the whole transaction must be retried by its owner.
    Other databases' errors, and the lock once the retries are spent, reach the caller.
    """
    delay = LOCKED_BACKOFF_S
    for tries_left in range(LOCKED_RETRIES, -1, -1):
        try:
            return work()
        except OperationalError as exc:
            if not tries_left or not _is_locked(exc) or connection.in_atomic_block:
                raise
            logger.info("database locked; trying again in %.2f s (%d tries left)", delay, tries_left)
            time.sleep(delay)
            delay = min(delay * 2, 4.0)
    raise AssertionError("unreachable")


def _is_locked(exc: BaseException) -> bool:
    return connection.vendor == "sqlite" and "locked" in str(exc)


class Heartbeat:
    """Beats a lease from a thread while the attempt works, whatever the attempt is doing.

    Beats come every `every` seconds of wall time (not counted in polls, which a loaded machine
    stretches). A beat that fails on the database (Redis or the database away for a moment, SQLite
    locked) is tried again soon; only "this attempt no longer holds the row" ends the beating: it
    sets `lost` and calls `on_lost`, which stops whatever the attempt runs. `poll`, when given, is
    called every `poll_every` seconds in between (a cancel watch) and may stop the work too.
    """

    def __init__(
        self,
        lease: Lease | models.QuerySet[Any],
        every: float,
        *,
        on_lost: Callable[[], None] = lambda: None,
        poll: Callable[[], None] | None = None,
        poll_every: float = 0.5,
        also: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        # A lease (the attempt's row), or rows worked on by many jobs at once (a validation run's
        # tasks fanned out over the pool), which each beat while they run.
        self.lease = lease if isinstance(lease, Lease) else None
        self.rows = None if isinstance(lease, Lease) else lease
        self.every = max(0.05, every)
        self.on_lost = on_lost
        self.poll = poll
        self.poll_every = min(poll_every, self.every)
        self.also = also
        self.lost = threading.Event()
        self._done = threading.Event()
        self._short_wait = False
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self._name()}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def check(self) -> None:
        """Raise Superseded when the lease is known to be gone."""
        if self.lost.is_set() and self.lease is not None:
            raise Superseded(self.lease)

    def _beat(self) -> bool:
        """One beat; False only when the row is there and no longer running under this attempt.

        A row this thread cannot see (created in a transaction not yet committed, as a test's) is
        not a lost one: the attempt's own fenced writes say when it is superseded.
        """
        if connection.vendor == "sqlite" and not self._short_wait:
            # A beat that waits out a long writer (an import's transaction) holds up the attempt's
            # end; it fails fast here and the loop beats again a moment later.
            with connection.cursor() as cursor:
                cursor.execute(f"PRAGMA busy_timeout = {int(min(self.every, 2.0) * 1000)}")
            self._short_wait = True
        also = self.also() if self.also else {}
        rows = self.lease.rows() if self.lease is not None else self.rows
        assert rows is not None
        if rows.filter(status=RUNNING).update(heartbeat_at=timezone.now(), **also):
            return True
        if self.lease is None:
            return False
        return not self.lease.model._default_manager.filter(pk=self.lease.pk).exists()

    def _run(self) -> None:
        next_beat = time.monotonic() + self.every
        failing = False
        try:
            while not self._done.wait(self.poll_every):
                if self.poll is not None:
                    self._safely(self.poll)
                if time.monotonic() < next_beat:
                    continue
                try:
                    alive = self._beat()
                except DatabaseError as exc:
                    if not failing:
                        logger.warning("%s: a heartbeat failed (%s); trying again", self._name(), exc)
                    failing = True
                    connection.close()  # a broken connection is not reused by the next beat
                    self._short_wait = False
                    next_beat = time.monotonic() + min(1.0, self.every)
                    continue
                failing = False
                next_beat = time.monotonic() + self.every
                if not alive and not self._done.is_set():
                    logger.warning("%s no longer holds the row; stopping it", self._name())
                    self.lost.set()
                    self._safely(self.on_lost)
                    return
        finally:
            connection.close()  # this thread's own connection

    def _safely(self, call: Callable[[], None]) -> None:
        try:
            call()
        except Exception:  # noqa: BLE001 - a failed poll must not stop the beats that keep the row
            logger.exception("%s: a check beside the heartbeat failed", self._name())
            connection.close()

    def _name(self) -> str:
        if self.lease is not None:
            return f"{self.lease.model.__name__} {self.lease.pk} attempt {self.lease.attempt}"
        assert self.rows is not None
        return f"{self.rows.model.__name__} rows"
