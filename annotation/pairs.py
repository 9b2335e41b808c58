"""Drawing pairs of patches for a comparison set, for people to judge (reward-model training data).

Pairs come from one suite's finished trajectories that Crucible scored itself (verified),
optionally narrowed to rollout batches or a training set, and are drawn by one of
core.vocabulary.ComparisonStrategy. A pair is never two identical patches (compared after
normalising the diff), never an empty patch, never twice the same two trajectories; each task
gives at most `per_task` pairs and the set at most `max_pairs`. The same request and seed draw
the same pairs. What was considered and skipped, and why, is kept in ComparisonSet.stats.

Training sets live in a higher layer (training), so this module never reads them: training
registers a resolver with `register_source("training_set", resolver)` in its AppConfig.ready().
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet

from annotation.models import Comparison, ComparisonSet
from core.vocabulary import ComparisonStrategy, TrajectoryStatus, values
from patches.model import FilePatch, LineKind, PatchError
from patches.parse import parse
from tasks.models import TaskSuite
from trajectories.models import RolloutBatch, Trajectory

logger = logging.getLogger(__name__)

MAX_PAIRS = 100_000
MAX_REVIEWERS = 20
# A task with more candidates than this is sampled down first: n trajectories make n(n-1)/2 pairs.
POOL_PER_TASK = 200
CHUNK = 500  # SQLite bounds the number of parameters of one query
TRAINING_SET = "training_set"


class PairsError(ValueError):
    """A request for pairs that cannot be met; nothing was written.

    `field` names the PairRequest field at fault, so the page puts the message beside its
    input and the command prefixes its own flag; the message itself names neither.
    """

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


# --- where trajectory ids come from (filled in by higher layers) -------------------------

SourceResolver = Callable[[str], Sequence[str]]
_sources: dict[str, SourceResolver] = {}


def register_source(name: str, resolver: SourceResolver) -> None:
    """Let a higher layer name a list of trajectory ids: resolver(value) -> ids, LookupError when unknown."""
    _sources[name] = resolver


def resolve_source(name: str, value: str) -> list[str]:
    resolver = _sources.get(name)
    if resolver is None:
        raise PairsError(f"pairs cannot be drawn from a {name.replace('_', ' ')}: no app registered that source")
    try:
        return [str(i) for i in resolver(value)]
    except (LookupError, ValueError) as exc:
        raise PairsError(str(exc) or f"no {name.replace('_', ' ')} named {value!r}") from None


# --- the request -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Side:
    """One side of a checkpoint comparison: the trajectories of a batch, or of a policy model."""

    batch: int | None = None
    model: str = ""

    @classmethod
    def parse(cls, text: str) -> Side:
        """`batch:ID`, `model:NAME`, a bare number (a batch id) or anything else (a model name)."""
        text = text.strip()
        kind, _, rest = text.partition(":")
        if kind == "batch" or (not rest and text.isdigit()):
            number = rest if kind == "batch" else text
            if not number.isdigit():
                raise PairsError(f"side {text!r}: a batch id is a number")
            return cls(batch=int(number))
        name = rest if kind == "model" else text
        if not name:
            raise PairsError("a side is a batch id (batch:ID) or a policy model (model:NAME)")
        return cls(model=name)

    def filter(self, qs: QuerySet[Trajectory]) -> QuerySet[Trajectory]:
        return qs.filter(batch_id=self.batch) if self.batch is not None else qs.filter(policy_model=self.model)

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch} if self.batch is not None else {"model": self.model}


@dataclass(frozen=True, kw_only=True)
class PairRequest:
    name: str
    suite: str
    strategy: str
    max_pairs: int
    reviewers: int = 1
    per_task: int = 5
    batches: tuple[int, ...] = ()
    training_set: str = ""
    side_a: str = ""
    side_b: str = ""
    seed: int = 0
    lock_seconds: int = 600
    blind: bool = True


# --- what makes two patches the same -----------------------------------------------------


def patch_fingerprint(text: str) -> str:
    """A hash of what a patch changes, blind to context, line numbers, index lines and whitespace.

    "" for a patch that changes nothing once whitespace-only edits are dropped: such a patch
    is as empty as no patch for a reviewer.
    """
    if not text.strip():
        return ""
    try:
        files = parse(text, recount=True)
    except PatchError:
        # Unreadable as a diff: the text itself, less index lines and whitespace, still says what it is.
        lines = ["".join(line.split()) for line in text.splitlines() if not line.startswith("index ")]
        kept = [line for line in lines if line]
        return hashlib.sha256("\n".join(kept).encode()).hexdigest() if kept else ""
    parts = [part for fp in sorted(files, key=lambda p: (p.path, p.old_path or "")) if (part := _file_part(fp))]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest() if parts else ""


def _file_part(fp: FilePatch) -> list[Any] | None:
    removed = [squash for line in _changed(fp, LineKind.REMOVED) if (squash := "".join(line.split()))]
    added = [squash for line in _changed(fp, LineKind.ADDED) if (squash := "".join(line.split()))]
    # A line removed and added again with other whitespace is a whitespace-only edit: it cancels.
    common = Counter(removed) & Counter(added)
    removed, added = _without(removed, common), _without(added, common)
    binary = [h.data for h in fp.binary_hunks]
    renamed = fp.old_path != fp.new_path
    # An index line may carry the file's mode: only a change of mode is a change.
    mode = [fp.old_mode, fp.new_mode] if fp.old_mode and fp.new_mode and fp.old_mode != fp.new_mode else None
    if not removed and not added and not binary and not fp.binary and not renamed and mode is None:
        return None
    return [fp.old_path, fp.new_path, mode, fp.binary, binary, removed, added]


def _changed(fp: FilePatch, kind: LineKind) -> Iterable[str]:
    return (line.text for hunk in fp.hunks for line in hunk.lines if line.kind is kind)


def _without(lines: list[str], drop: Counter[str]) -> list[str]:
    left = Counter(drop)
    out = []
    for line in lines:
        if left[line] > 0:
            left[line] -= 1
        else:
            out.append(line)
    return out


# --- the verified test outcome of each trajectory ----------------------------------------


def verified_tests(trajectory_pks: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Per trajectory, the per-list test counts of the reward that set its verified outcome.

    `rewards` is a sibling layer, so its model is not imported: the rows are read through the
    trajectory's reverse relation, and only the one computed under the trajectory's own
    scored_spec counts (an older spec's result is not the verified outcome).
    """
    pks = sorted(set(trajectory_pks))
    out: dict[int, dict[str, Any]] = {}
    for start in range(0, len(pks), CHUNK):
        rows = Trajectory.objects.filter(
            pk__in=pks[start : start + CHUNK], rewards__spec_version=F("scored_spec")
        ).values_list("pk", "rewards__tests")
        for pk, tests in rows:
            if isinstance(tests, dict):
                out[pk] = tests
    return out


def test_outcome(tests: dict[str, Any] | None) -> tuple[tuple[str, int, int], ...] | None:
    """(list, passed, total) per test list, sorted; None when nothing was recorded."""
    if not tests:
        return None
    rows = []
    for name, counts in sorted(tests.items()):
        if isinstance(counts, dict):
            rows.append((str(name), int(counts.get("passed") or 0), int(counts.get("total") or 0)))
    return tuple(rows) or None


# --- drawing -----------------------------------------------------------------------------


@dataclass
class _Candidate:
    pk: int
    task_pk: int
    task_ref: str
    success: bool | None
    reward: float | None
    fingerprint: str
    outcome: tuple[tuple[str, int, int], ...] | None = None
    side: str = ""


@transaction.atomic
def draw_pairs(request: PairRequest, created_by: User | None = None) -> ComparisonSet:
    """Create the comparison set `request.name` with its pairs, or raise PairsError and write nothing."""
    suite, sides = _validate(request)
    stats: dict[str, Any] = {"seed": request.seed, "excluded": {}, "skipped": {}}
    pool = _pool(request, suite, sides, stats)
    rng = random.Random(request.seed)
    chosen = _choose(request, pool, rng, stats)
    if not chosen:
        raise PairsError(f"no pairs could be drawn: {_explain(stats)}")
    try:
        # A savepoint: two requests for one new name race past the check above; the loser says so.
        with transaction.atomic():
            cset = ComparisonSet.objects.create(
                name=request.name,
                suite=suite,
                strategy=request.strategy,
                source=_source_json(request, suite, sides),
                reviewers_per_pair=request.reviewers,
                max_per_task=request.per_task,
                lock_seconds=request.lock_seconds,
                blind=request.blind,
                stats=stats,
                created_by=created_by,
            )
    except IntegrityError:
        raise PairsError(f"a comparison set named {request.name!r} already exists", field="name") from None
    Comparison.objects.bulk_create(
        [
            Comparison(
                comparison_set=cset,
                task_id=a.task_pk,
                task_ref=a.task_ref,
                trajectory_a_id=a.pk,
                trajectory_b_id=b.pk,
                pair_key=pair_key(a.pk, b.pk, ids=pool.ids),
                position=position,
            )
            for position, (a, b) in enumerate(chosen)
        ],
        batch_size=1000,
    )
    logger.info(
        "comparison set %s: %d pairs drawn by %s from suite %s", cset.name, len(chosen), request.strategy, suite.name
    )
    return cset


def pair_key(pk_a: int, pk_b: int, *, ids: dict[int, str]) -> str:
    return ":".join(sorted((ids[pk_a], ids[pk_b])))


def _validate(request: PairRequest) -> tuple[TaskSuite, tuple[Side, Side] | None]:
    try:
        validate_slug(request.name)
    except ValidationError:
        raise PairsError(f"set name {request.name!r}: use letters, digits, '-' and '_' only", field="name") from None
    if len(request.name) > 100:
        raise PairsError("a set name is at most 100 characters", field="name")
    if ComparisonSet.objects.filter(name=request.name).exists():
        raise PairsError(f"a comparison set named {request.name!r} already exists", field="name")
    if request.strategy not in values(ComparisonStrategy):
        raise PairsError(f"strategy must be one of {', '.join(values(ComparisonStrategy))}")
    if not 1 <= request.max_pairs <= MAX_PAIRS:
        raise PairsError(f"the number of pairs must be between 1 and {MAX_PAIRS}", field="max_pairs")
    if not 1 <= request.reviewers <= MAX_REVIEWERS:
        raise PairsError(f"reviewers per pair must be between 1 and {MAX_REVIEWERS}")
    if request.per_task < 1:
        raise PairsError("the cap per task must be at least 1")
    if request.lock_seconds < 30:
        raise PairsError("a lock lasts at least 30 seconds")
    suite = TaskSuite.objects.filter(name=request.suite).first()
    if suite is None:
        raise PairsError(f"no suite named {request.suite!r}")
    known = set(RolloutBatch.objects.filter(pk__in=request.batches, suite=suite).values_list("pk", flat=True))
    missing = [str(b) for b in request.batches if b not in known]
    if missing:
        raise PairsError(f"no rollout batch {', '.join(missing)} in suite {suite.name!r}")
    sides = None
    if request.strategy == ComparisonStrategy.CHECKPOINTS:
        if not request.side_a or not request.side_b:
            raise PairsError("the checkpoints strategy needs both sides, A and B", field="side_a")
        sides = (Side.parse(request.side_a), Side.parse(request.side_b))
        if sides[0] == sides[1]:
            raise PairsError("the two sides of a checkpoint comparison must differ")
        for side in sides:
            if side.batch is not None and not RolloutBatch.objects.filter(pk=side.batch, suite=suite).exists():
                raise PairsError(f"no rollout batch {side.batch} in suite {suite.name!r}")
    elif request.side_a or request.side_b:
        raise PairsError("sides A and B belong to the checkpoints strategy", field="side_a")
    return suite, sides


@dataclass
class _Pool:
    by_task: dict[int, list[_Candidate]]
    ids: dict[int, str]


def _pool(request: PairRequest, suite: TaskSuite, sides: tuple[Side, Side] | None, stats: dict[str, Any]) -> _Pool:
    qs = Trajectory.objects.filter(suite=suite)
    if request.batches:
        qs = qs.filter(batch_id__in=request.batches)
    if request.training_set:
        wanted = resolve_source(TRAINING_SET, request.training_set)
        stats["training_set_trajectories"] = len(wanted)
        qs = qs.filter(trajectory_id__in=wanted)
    stats["trajectories"] = qs.count()
    excluded = stats["excluded"]
    excluded["not_finished"] = qs.exclude(status=TrajectoryStatus.FINISHED).count()
    qs = qs.filter(status=TrajectoryStatus.FINISHED)
    # Only Crucible's own scoring counts: an imported file's rewards are claims.
    excluded["not_scored"] = qs.filter(scored_at=None).count()
    qs = qs.exclude(scored_at=None)
    excluded["task_not_in_database"] = qs.filter(task=None).count()
    qs = qs.exclude(task=None)
    side_of: dict[int, str] = {}
    if sides is not None:
        for label, side in zip(("A", "B"), sides, strict=True):
            for pk in side.filter(qs).values_list("pk", flat=True):
                # A trajectory on both sides would be compared with itself's kin: it belongs to neither.
                side_of[pk] = "" if pk in side_of else label
        excluded["on_neither_side"] = qs.count() - sum(1 for v in side_of.values() if v)
        qs = qs.filter(pk__in=[pk for pk, v in side_of.items() if v]) if side_of else qs.none()
    rows = list(qs.order_by("pk").values_list("pk", "trajectory_id", "task_id", "task_ref", "success", "final_reward"))
    patches = _patches(row[0] for row in rows)
    tests = verified_tests(row[0] for row in rows) if request.strategy == ComparisonStrategy.SAME_OUTCOME else {}
    by_task: dict[int, list[_Candidate]] = defaultdict(list)
    ids: dict[int, str] = {}
    empty = 0
    for pk, trajectory_id, task_pk, task_ref, success, reward in rows:
        fingerprint = patch_fingerprint(patches.get(pk, ""))
        if not fingerprint:
            empty += 1
            continue
        ids[pk] = str(trajectory_id)
        by_task[task_pk].append(
            _Candidate(
                pk, task_pk, task_ref, success, reward, fingerprint, test_outcome(tests.get(pk)), side_of.get(pk, "")
            )
        )
    excluded["empty_patch"] = empty
    stats["candidates"] = len(ids)
    stats["tasks"] = len(by_task)
    return _Pool(by_task=dict(by_task), ids=ids)


def _patches(pks: Iterable[int]) -> dict[int, str]:
    wanted = list(pks)
    out: dict[int, str] = {}
    for start in range(0, len(wanted), CHUNK):
        out.update(Trajectory.objects.filter(pk__in=wanted[start : start + CHUNK]).values_list("pk", "patch"))
    return out


def _choose(
    request: PairRequest, pool: _Pool, rng: random.Random, stats: dict[str, Any]
) -> list[tuple[_Candidate, _Candidate]]:
    skipped: Counter[str] = Counter()
    ranked: list[tuple[float, int, int, tuple[_Candidate, _Candidate]]] = []
    task_order = sorted(pool.by_task)
    rng.shuffle(task_order)
    for task_rank, task_pk in enumerate(task_order):
        pairs = _task_pairs(request, pool.by_task[task_pk], rng, skipped)
        kept = pairs[: request.per_task]
        skipped["over_per_task_cap"] += len(pairs) - len(kept)
        for rank, (a, b) in enumerate(kept):
            gap = (
                abs((a.reward or 0.0) - (b.reward or 0.0)) if request.strategy == ComparisonStrategy.CLOSE_REWARD else 0
            )
            # Round robin over tasks (each task's best pair first), so --max covers many tasks.
            ranked.append((gap, rank, task_rank, (a, b)))
    ranked.sort(key=lambda item: item[:3])
    chosen = [pair for *_, pair in ranked[: request.max_pairs]]
    skipped["over_max"] = max(0, len(ranked) - request.max_pairs)
    stats["skipped"] = dict(sorted(skipped.items()))
    stats["pairs"] = len(chosen)
    stats["tasks_with_pairs"] = len({a.task_pk for a, _ in chosen})
    return chosen


def _task_pairs(
    request: PairRequest, candidates: list[_Candidate], rng: random.Random, skipped: Counter[str]
) -> list[tuple[_Candidate, _Candidate]]:
    """Every admissible pair of one task, best first for the strategy, A and B already placed."""
    if len(candidates) > POOL_PER_TASK:
        skipped["over_task_pool"] += len(candidates) - POOL_PER_TASK
        candidates = sorted(rng.sample(candidates, POOL_PER_TASK), key=lambda c: c.pk)
    if request.strategy == ComparisonStrategy.CHECKPOINTS:
        raw = list(
            itertools.product([c for c in candidates if c.side == "A"], [c for c in candidates if c.side == "B"])
        )
    else:
        raw = list(itertools.combinations(candidates, 2))
    pairs: list[tuple[_Candidate, _Candidate]] = []
    seen: set[frozenset[str]] = set()
    for a, b in raw:
        if a.fingerprint == b.fingerprint:
            skipped["identical_patches"] += 1
            continue
        if request.strategy == ComparisonStrategy.SAME_OUTCOME and not _same_outcome(a, b):
            skipped["different_outcome"] += 1
            continue
        patches = frozenset((a.fingerprint, b.fingerprint))
        if patches in seen:
            # The same two patches again (from other trajectories): one judgement answers both.
            skipped["same_two_patches"] += 1
            continue
        seen.add(patches)
        if request.strategy != ComparisonStrategy.CHECKPOINTS and rng.random() < 0.5:
            a, b = b, a
        pairs.append((a, b))
    rng.shuffle(pairs)
    if request.strategy == ComparisonStrategy.CLOSE_REWARD:
        pairs.sort(key=lambda p: abs((p[0].reward or 0.0) - (p[1].reward or 0.0)))
    return pairs


def _same_outcome(a: _Candidate, b: _Candidate) -> bool:
    if a.success != b.success:
        return False
    if a.outcome is not None and b.outcome is not None:
        return a.outcome == b.outcome
    # No per-test record for one of them: the verified reward is the outcome left to compare.
    return a.reward == b.reward


def _explain(stats: dict[str, Any]) -> str:
    parts = [f"{stats.get('trajectories', 0)} trajectories in scope, {stats.get('candidates', 0)} usable"]
    reasons = {**stats.get("excluded", {}), **stats.get("skipped", {})}
    parts += [f"{count} {reason.replace('_', ' ')}" for reason, count in reasons.items() if count]
    return "; ".join(parts)


def _source_json(request: PairRequest, suite: TaskSuite, sides: tuple[Side, Side] | None) -> dict[str, Any]:
    source: dict[str, Any] = {"suite": suite.name, "seed": request.seed, "max": request.max_pairs}
    if request.batches:
        source["batches"] = list(request.batches)
    if request.training_set:
        source["training_set"] = request.training_set
    if sides is not None:
        source["side_a"], source["side_b"] = sides[0].to_json(), sides[1].to_json()
    return source
