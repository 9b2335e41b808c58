"""One state machine for long work kept as a row: rollout batches, trajectories, validation runs,
training runs.

Rows move `queued → running → succeeded | finished | failed | cancelled`. Workers, the web
server and commands race on the same rows (a cancel arrives while a worker finishes the last
trajectory; a redelivered job wakes up after its batch was cancelled), so every move is a
conditional UPDATE on the state the move is allowed from: whoever reaches a terminal state
first wins, and a late writer changes nothing instead of overwriting it.

Terminal states are final for workers. Only a person's explicit resume (`reopen`) brings a
cancelled or failed row back to queued; nothing ever leaves succeeded or finished.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import models

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


class StateError(ValueError):
    """A state that the row's model does not have."""


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
    the same state, and a row already terminal stays as it is. `match` adds conditions (a
    worker's attempt number, so a worker whose row was taken over cannot write). `also` are further fields
    written in the same UPDATE (finished_at, error, ...). The object is updated in memory
    when the row moved, and refreshed from the database when it did not.
    """
    model = type(obj)
    _check(model, field, new)
    allowed = set(sources(new))
    if only_from is not None:
        allowed &= set(only_from)
    rows = model._default_manager.filter(pk=obj.pk, **{f"{field}__in": allowed}, **(match or {}))
    moved = rows.update(**{field: new}, **also)
    if moved:
        setattr(obj, field, new)
        for name, value in also.items():
            if not hasattr(value, "resolve_expression"):
                setattr(obj, name, value)
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
