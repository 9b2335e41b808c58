"""Curation: filter rules and a priority sampler produce a frozen TrainingSet.

Every training set is verified: it is chosen by rewards Crucible computed under one named
reward spec (recorded in the set's rule), never by what an imported file claims. A
trajectory with no reward under that spec does not enter, and neither does one carrying a
flag whose policy is `review` until a reviewer has cleared that flag (annotation).
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, transaction
from django.db.models import F, FilteredRelation, Max, Q

from annotation.models import flag_key
from annotation.queries import cleared_flag_keys
from core.vocabulary import TrajectoryStatus
from rewards.services import active_spec
from rewards.spec import RewardSpec
from training.models import TrainingSet
from trajectories.models import Trajectory
from trajectories.queries import TrajectoryFilter

logger = logging.getLogger(__name__)

# Each lost race for a version costs one retry; more than a handful of writers freezing the
# same name at the same moment is not a real workload.
VERSION_ATTEMPTS = 5
REVIEW = "review"  # the reward spec's policy that asks a person (rewards.spec.POLICIES)


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
    # The reward spec whose verified rewards choose the set; empty means the current one.
    spec_version: str = ""

    def check(self) -> None:
        if self.per_task_limit is not None and self.per_task_limit < 1:
            raise CurationError("per-task limit must be at least 1")
        if self.size is not None and self.size < 1:
            raise CurationError("size must be at least 1")
        if self.success_ratio is not None and not 0 <= self.success_ratio <= 1:
            raise CurationError("success ratio must be between 0 and 1")
        if self.max_duplicate_rate is not None and not 0 <= self.max_duplicate_rate <= 1:
            raise CurationError("max duplicate rate must be between 0 and 1")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A trajectory as curation sees it: its outcome is the verified reward under the rule's spec."""

    pk: int
    trajectory_id: uuid.UUID
    task_ref: str
    patch: str
    duplicate_rate: float
    reward: float
    success: bool
    flags: list[Any]


@dataclass
class Selection:
    spec_version: str
    chosen: list[Candidate]
    unscored: int = 0  # matched the filter but have no reward under the spec
    awaiting_review: int = 0  # carry a review flag no reviewer has cleared


def _spec_for(rule: CurationRule, spec: RewardSpec | None) -> RewardSpec:
    spec = spec or active_spec()
    if rule.spec_version and rule.spec_version != spec.version:
        raise CurationError(
            f"the rule names reward spec {rule.spec_version}, but the spec in use is {spec.version}: "
            "score the trajectories under it, or curate under the current spec"
        )
    return spec


def review_flags(flags: list[Any], spec: RewardSpec) -> list[dict[str, Any]]:
    """The flags that wait for a person under `spec` (a detector the spec does not know does too)."""
    return [f for f in flags if not isinstance(f, dict) or spec.policy(str(f.get("detector"))) == REVIEW]


def select(rule: CurationRule, spec: RewardSpec | None = None) -> Selection:
    """The trajectories a rule chooses, by their verified rewards under one reward spec."""
    rule.check()
    spec = _spec_for(rule, spec)
    flt = TrajectoryFilter(rule.query, queryset=Trajectory.objects.filter(status=TrajectoryStatus.FINISHED))
    if not flt.is_valid():
        raise CurationError(f"bad filter: {dict(flt.errors)}")
    matching = flt.qs
    if rule.max_duplicate_rate is not None:
        matching = matching.filter(duplicate_rate__lte=rule.max_duplicate_rate)
    # The reward row under the named spec, not the trajectory's own columns: those hold the
    # latest scoring under whatever spec, and an imported file's claim is never among them.
    verified = matching.annotate(
        verified=FilteredRelation("rewards", condition=Q(rewards__spec_version=spec.version))
    ).filter(verified__isnull=False)
    if rule.successes_only:
        verified = verified.filter(verified__resolved=True)
    rows = verified.order_by("task_ref", "-verified__reward", "id").values(
        "pk",
        "trajectory_id",
        "task_ref",
        "patch",
        "duplicate_rate",
        verified_reward=F("verified__reward"),
        verified_success=F("verified__resolved"),
        verified_flags=F("verified__flags"),
    )
    candidates = [
        Candidate(
            pk=row["pk"],
            trajectory_id=row["trajectory_id"],
            task_ref=row["task_ref"],
            patch=row["patch"],
            duplicate_rate=row["duplicate_rate"],
            reward=row["verified_reward"],
            success=bool(row["verified_success"]),
            flags=row["verified_flags"] or [],
        )
        for row in rows
    ]
    unscored = matching.exclude(rewards__spec_version=spec.version).count()
    chosen, awaiting_review = _without_uncleared_review_flags(candidates, spec)
    if rule.require_discrimination:
        rewards: dict[str, set[float]] = defaultdict(set)
        for c in chosen:
            rewards[c.task_ref].add(c.reward)
        chosen = [c for c in chosen if len(rewards[c.task_ref]) > 1]
    if rule.per_task_limit is not None:
        chosen = _diverse(chosen, rule.per_task_limit)
    return Selection(
        spec_version=spec.version,
        chosen=_sample(chosen, rule),
        unscored=unscored,
        awaiting_review=awaiting_review,
    )


def _without_uncleared_review_flags(candidates: list[Candidate], spec: RewardSpec) -> tuple[list[Candidate], int]:
    flagged = {c.pk: review_flags(c.flags, spec) for c in candidates}
    cleared = cleared_flag_keys(pk for pk, flags in flagged.items() if flags)
    kept = [c for c in candidates if all(flag_key(f) in cleared.get(c.pk, set()) for f in flagged[c.pk])]
    return kept, len(candidates) - len(kept)


def _diverse(trajectories: list[Candidate], limit: int) -> list[Candidate]:
    """Per task, distinct patches before repeats of a solution path already kept."""
    out: list[Candidate] = []
    by_task: dict[str, list[Candidate]] = defaultdict(list)
    for t in trajectories:
        by_task[t.task_ref].append(t)
    for group in by_task.values():
        first: list[Candidate] = []
        rest: list[Candidate] = []
        seen: set[str] = set()
        for t in group:
            (rest if t.patch in seen else first).append(t)
            seen.add(t.patch)
        out += (first + rest)[:limit]
    return out


def _sample(trajectories: list[Candidate], rule: CurationRule) -> list[Candidate]:
    rng = random.Random(rule.seed)  # noqa: S311  (a reproducible sample, not a secret)
    if rule.size is None:
        return trajectories
    if rule.success_ratio is None:
        pool = list(trajectories)
        rng.shuffle(pool)
        return pool[: rule.size]
    successes = sorted((t for t in trajectories if t.success), key=lambda t: -t.reward)
    failures = [t for t in trajectories if not t.success]
    want = round(rule.size * rule.success_ratio)
    picked = successes[:want]
    # Representative failures: round-robin over tasks, so no single task dominates.
    by_task: dict[str, list[Candidate]] = defaultdict(list)
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
    name: str,
    rule: CurationRule,
    user: AbstractBaseUser | AnonymousUser | None = None,
    spec: RewardSpec | None = None,
) -> TrainingSet:
    """Freeze the rule's choice as the next version of `name`; the rule records the spec that chose it."""
    started = time.monotonic()
    selection = select(rule, spec)
    chosen = selection.chosen
    if not chosen:
        raise CurationError(
            f"the rule chose no trajectory: under reward spec {selection.spec_version}, "
            f"{selection.unscored} matching trajectories have no reward yet (score them first) and "
            f"{selection.awaiting_review} wait for a reviewer to clear their review flags"
        )
    successes = sum(c.success for c in chosen)
    training_set = _create_next_version(
        name,
        {
            "rule": asdict(replace(rule, spec_version=selection.spec_version)),
            "trajectory_ids": [str(c.trajectory_id) for c in chosen],
            "stats": {
                "trajectories": len(chosen),
                "successes": successes,
                "failures": len(chosen) - successes,
                "tasks": len({c.task_ref for c in chosen}),
                "verified": True,
                "unscored_left_out": selection.unscored,
                "awaiting_review_left_out": selection.awaiting_review,
            },
            "created_by": user if user is not None and user.pk else None,
        },
    )
    logger.info(
        "training set %s v%d frozen under %s: %d trajectories (%d successes), %d unscored and %d awaiting review "
        "left out, by user %s in %.2fs",
        name,
        training_set.version,
        selection.spec_version,
        len(chosen),
        successes,
        selection.unscored,
        selection.awaiting_review,
        getattr(user, "pk", None),
        time.monotonic() - started,
    )
    return training_set
