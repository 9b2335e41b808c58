"""Curation (seed §4.3): filter rules and a priority sampler produce a frozen TrainingSet."""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, transaction
from django.db.models import Max

from core.vocabulary import TrajectoryStatus
from training.models import TrainingSet
from trajectories.models import Trajectory
from trajectories.queries import TrajectoryFilter

logger = logging.getLogger(__name__)

# Each lost race for a version costs one retry; more than a handful of writers freezing the
# same name at the same moment is not a real workload.
VERSION_ATTEMPTS = 5


class CurationError(ValueError):
    pass


@dataclass(kw_only=True)
class CurationRule:
    query: dict[str, str] = field(default_factory=dict)  # trajectory-list filter parameters
    successes_only: bool = False
    max_duplicate_rate: float | None = None  # action validity
    per_task_limit: int | None = None  # diversity: at most this many per task, distinct patches first
    require_discrimination: bool = False  # keep tasks whose rewards differ across their trajectories
    size: int | None = None
    success_ratio: float | None = None  # priority sampler: this share successes, the rest failures
    seed: int = 0

    def check(self) -> None:
        if self.per_task_limit is not None and self.per_task_limit < 1:
            raise CurationError("per-task limit must be at least 1")
        if self.size is not None and self.size < 1:
            raise CurationError("size must be at least 1")
        if self.success_ratio is not None and not 0 <= self.success_ratio <= 1:
            raise CurationError("success ratio must be between 0 and 1")
        if self.max_duplicate_rate is not None and not 0 <= self.max_duplicate_rate <= 1:
            raise CurationError("max duplicate rate must be between 0 and 1")


def select(rule: CurationRule) -> list[Trajectory]:
    rule.check()
    flt = TrajectoryFilter(rule.query, queryset=Trajectory.objects.filter(status=TrajectoryStatus.FINISHED))
    if not flt.is_valid():
        raise CurationError(f"bad filter: {dict(flt.errors)}")
    qs = flt.qs.only("id", "trajectory_id", "task_ref", "success", "final_reward", "patch", "duplicate_rate")
    if rule.successes_only:
        qs = qs.filter(success=True)
    if rule.max_duplicate_rate is not None:
        qs = qs.filter(duplicate_rate__lte=rule.max_duplicate_rate)
    chosen = list(qs.order_by("task_ref", "-final_reward", "id"))
    if rule.require_discrimination:
        rewards: dict[str, set[float | None]] = defaultdict(set)
        for t in chosen:
            rewards[t.task_ref].add(t.final_reward)
        chosen = [t for t in chosen if len(rewards[t.task_ref]) > 1]
    if rule.per_task_limit is not None:
        chosen = _diverse(chosen, rule.per_task_limit)
    return _sample(chosen, rule)


def _diverse(trajectories: list[Trajectory], limit: int) -> list[Trajectory]:
    """Per task, distinct patches before repeats of a solution path already kept."""
    out: list[Trajectory] = []
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        by_task[t.task_ref].append(t)
    for group in by_task.values():
        first: list[Trajectory] = []
        rest: list[Trajectory] = []
        seen: set[str] = set()
        for t in group:
            (rest if t.patch in seen else first).append(t)
            seen.add(t.patch)
        out += (first + rest)[:limit]
    return out


def _sample(trajectories: list[Trajectory], rule: CurationRule) -> list[Trajectory]:
    rng = random.Random(rule.seed)  # noqa: S311  (a reproducible sample, not a secret)
    if rule.size is None:
        return trajectories
    if rule.success_ratio is None:
        pool = list(trajectories)
        rng.shuffle(pool)
        return pool[: rule.size]
    successes = sorted((t for t in trajectories if t.success), key=lambda t: -(t.final_reward or 0))
    failures = [t for t in trajectories if not t.success]
    want = round(rule.size * rule.success_ratio)
    picked = successes[:want]
    # Representative failures: round-robin over tasks, so no single task dominates.
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in failures:
        by_task[t.task_ref].append(t)
    for group in by_task.values():
        rng.shuffle(group)
    queues = [by_task[k] for k in sorted(by_task)]
    spread = []
    while any(queues):
        for queue in queues:
            if queue:
                spread.append(queue.pop())
    picked += spread[: rule.size - len(picked)]
    rng.shuffle(picked)
    return picked


def _next_version(name: str) -> int:
    # Locking the versions that exist makes a second writer of the same name wait here on
    # PostgreSQL instead of failing at the insert. A lock on an aggregate locks nothing, so
    # the rows are fetched; the first version has no row to lock, and SQLite ignores the
    # lock: the unique (name, version) constraint and the caller's retry cover both.
    list(TrainingSet.objects.select_for_update().filter(name=name).values_list("pk", flat=True))
    latest = TrainingSet.objects.filter(name=name).aggregate(v=Max("version"))["v"]
    return (latest or 0) + 1


def _create_next_version(name: str, fields: dict[str, object]) -> TrainingSet:
    for attempt in range(1, VERSION_ATTEMPTS + 1):
        version = _next_version(name)
        try:
            # A savepoint: losing the race undoes this insert only, not the caller's transaction.
            with transaction.atomic():
                return TrainingSet.objects.create(name=name, version=version, **fields)
        except IntegrityError:
            if not TrainingSet.objects.filter(name=name, version=version).exists():
                raise  # not the version race: let the real error through
            logger.info("training set %s v%d was taken concurrently (attempt %d); retrying", name, version, attempt)
    raise CurationError(f"could not allocate a version for {name!r}: too many concurrent creations")


@transaction.atomic
def build_training_set(
    name: str, rule: CurationRule, user: AbstractBaseUser | AnonymousUser | None = None
) -> TrainingSet:
    started = time.monotonic()
    chosen = select(rule)
    if not chosen:
        raise CurationError("the rule chose no trajectory")
    successes = sum(bool(t.success) for t in chosen)
    training_set = _create_next_version(
        name,
        {
            "rule": asdict(rule),
            "trajectory_ids": [str(t.trajectory_id) for t in chosen],
            "stats": {
                "trajectories": len(chosen),
                "successes": successes,
                "failures": len(chosen) - successes,
                "tasks": len({t.task_ref for t in chosen}),
            },
            "created_by": user if user is not None and user.pk else None,
        },
    )
    logger.info(
        "training set %s v%d frozen: %d trajectories (%d successes) by user %s in %.2fs",
        name,
        training_set.version,
        len(chosen),
        successes,
        getattr(user, "pk", None),
        time.monotonic() - started,
    )
    return training_set
