"""Eval isolation: the eval set must be completely isolated from the training set, or it
overestimates the policy (docs/training.md "Evaluating policies and checkpoints").

What a policy could have seen: every training set (its trajectories' tasks), the data of every
training run (`config.data.training_set`, `config.data.train_file`) and, for a checkpoint, the
data of every run along its lineage (parents, `dataset`). An eval task overlaps a training task
when it is the same task, changes the same repository + file + function, has a near-duplicate
statement (tasks.decontamination: word 3-gram Jaccard), or comes from the same upstream commit.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

from annotation.models import Comparison
from tasks.decontamination import TaskView, check
from tasks.models import Task, TaskSuite
from tasks.storage import tree_path
from training.models import Checkpoint, TrainingRun, TrainingSet
from trajectories.models import Trajectory

logger = logging.getLogger(__name__)

OVERLAP_KINDS = ("task_id", "same_function", "similar_statement", "same_commit")
SET_REF = re.compile(r"^(?P<name>[-\w]+)(?:@v?(?P<version>\d+))?$")
TRAIN_FILE_LINES_MAX = 200_000  # a train_file is read for task ids only, and never without bound
LINEAGE_MAX = 100  # parent links followed; a cycle in hand-edited rows must not hang a check
OVERLAPS_SHOWN = 20
ID_CHUNK = 5000


@dataclass(frozen=True)
class Overlap:
    kind: str  # one of OVERLAP_KINDS
    eval_task: str
    train_task: str
    source: str  # which training set, run or checkpoint could have shown it
    detail: str


class IsolationReport(TypedDict):
    clean: bool
    sources: list[str]
    eval_tasks: int
    train_tasks: int
    kinds: list[str]
    overlaps: list[dict[str, str]]


def _resolve_set(ref: object) -> TrainingSet | None:
    if isinstance(ref, int):
        return TrainingSet.objects.filter(pk=ref).first()
    match = SET_REF.match(str(ref or "").strip())
    if not match:
        return None
    sets = TrainingSet.objects.filter(name=match["name"])
    if match["version"]:
        return sets.filter(version=int(match["version"])).first()
    return sets.order_by("-version").first()


def _set_tasks(training_set: TrainingSet) -> set[str]:
    ids = [str(t) for t in training_set.trajectory_ids]
    found: set[str] = set()
    # In chunks: a large set would pass SQLite's limit on query parameters in one IN (...).
    for i in range(0, len(ids), ID_CHUNK):
        chunk = ids[i : i + ID_CHUNK]
        found.update(Trajectory.objects.filter(trajectory_id__in=chunk).values_list("task_ref", flat=True))
    return found


def _file_tasks(path: str) -> set[str]:
    found: set[str] = set()
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh):
                if i >= TRAIN_FILE_LINES_MAX:
                    break
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("task_id"), str):
                    found.add(record["task_id"])
    except OSError as exc:
        # A file no longer here cannot be checked; say so in the sources rather than pass silently.
        logger.warning("isolation: train_file %s unreadable: %s", path, exc)
    return found


def _run_data(run: TrainingRun) -> list[tuple[str, set[str]]]:
    data = run.config.get("data", {}) if isinstance(run.config, dict) else {}
    if not isinstance(data, dict):
        return []
    out = []
    if data.get("training_set"):
        training_set = _resolve_set(data["training_set"])
        if training_set is not None:
            out.append((f"run {run.pk} data.training_set {training_set}", _set_tasks(training_set)))
    if data.get("train_file"):
        out.append((f"run {run.pk} data.train_file {data['train_file']}", _file_tasks(str(data["train_file"]))))
    if data.get("comparison_set"):
        # The pairs' tasks: people's verdicts on them are what a reward or DPO run learned from.
        tasks = Comparison.objects.filter(comparison_set__name=str(data["comparison_set"])).values_list("task_ref")
        out.append((f"run {run.pk} data.comparison_set {data['comparison_set']}", {ref for (ref,) in tasks}))
    return out


def seen_tasks(checkpoint: Checkpoint | None = None) -> list[tuple[str, set[str]]]:
    """(where, task ids) for everything a policy could have been trained on."""
    sources = [(f"training set {s}", _set_tasks(s)) for s in TrainingSet.objects.all()]
    for run in TrainingRun.objects.all():
        sources += _run_data(run)
    seen: set[int] = set()
    current = checkpoint
    while current is not None and current.pk not in seen and len(seen) < LINEAGE_MAX:
        seen.add(current.pk)
        if current.dataset:
            training_set = _resolve_set(current.dataset)
            if training_set is not None:
                sources.append((f"checkpoint {current.name} dataset {training_set}", _set_tasks(training_set)))
        current = current.parent
    return sources


def _view(task: Task) -> TaskView:
    return TaskView(task.task_id, task.repo, task.statement, task.expected_patch, tree_path(task.snapshot_hash))


def find_overlaps(eval_tasks: list[Task], sources: list[tuple[str, set[str]]]) -> list[Overlap]:
    origin: dict[str, str] = {}  # train task -> the first source that shows it
    for label, task_ids in sources:
        for task_id in task_ids:
            origin.setdefault(task_id, label)
    eval_ids = {t.task_id for t in eval_tasks}
    overlaps = [Overlap("task_id", t, t, origin[t], "the same task") for t in sorted(eval_ids & origin.keys())]
    # The other kinds compare an eval task with the *other* tasks training saw.
    train_tasks = list(Task.objects.filter(task_id__in=set(origin) - eval_ids).order_by("task_id"))
    for finding in check([_view(t) for t in eval_tasks], [_view(t) for t in train_tasks]):
        overlaps.append(
            Overlap(finding.kind, finding.eval_task, finding.train_task, origin[finding.train_task], finding.detail)
        )
    commits = {(t.repo, t.base_commit): t.task_id for t in train_tasks if t.repo and t.base_commit}
    for task in eval_tasks:
        other = commits.get((task.repo, task.base_commit))
        if other is not None:
            overlaps.append(
                Overlap("same_commit", task.task_id, other, origin[other], f"{task.repo} @ {task.base_commit}")
            )
    return overlaps


def check_isolation(suite: TaskSuite, checkpoint: Checkpoint | None = None) -> IsolationReport:
    sources = seen_tasks(checkpoint)
    eval_tasks = list(suite.tasks.order_by("task_id"))
    overlaps = find_overlaps(eval_tasks, sources)
    return {
        "clean": not overlaps,
        "sources": [label for label, _ in sources],
        "eval_tasks": len(eval_tasks),
        "train_tasks": len(set().union(*(ids for _, ids in sources))) if sources else 0,
        "kinds": list(OVERLAP_KINDS),
        "overlaps": [asdict(o) for o in overlaps],
    }


def describe(report: IsolationReport | dict[str, Any]) -> str:
    """One paragraph naming the overlaps, for a refusal or a forced run's warning."""
    overlaps = report.get("overlaps", [])
    shown = "; ".join(
        f"{o['kind']}: {o['eval_task']} ~ {o['train_task']} ({o['detail']}; from {o['source']})"
        for o in overlaps[:OVERLAPS_SHOWN]
    )
    more = f"; and {len(overlaps) - OVERLAPS_SHOWN} more" if len(overlaps) > OVERLAPS_SHOWN else ""
    return f"the eval suite overlaps training data in {len(overlaps)} place(s): {shown}{more}"
