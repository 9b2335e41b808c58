"""The train file a trainer reads: written from a verified training set, a comparison set's
verdicts (reward / dpo: annotation.preferences, as the preferences export writes them), or a given
file checked.

Formats per kind (the interface with training.trainers):
- sft: `{"messages": [...], "tools": [...]}` per line, the chat the hf policy has
  (trajectories.conversation), from the set's verified successes only (rejection sampling);
- reward / dpo: TRL preference rows `prompt`, `chosen`, `rejected` plus lineage columns;
- grpo: `{"prompt": [...], "task_id", "task_dir"}` per line, one per task, with the task
  written out as a task directory the plain-Python scorer reads.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotation.models import ComparisonSet
from annotation.preferences import iter_preference_rows
from core.vocabulary import PairSides, TrainingKind
from rewards.models import Reward
from tasks.models import Task
from tasks.storage import tree_path
from training.models import TrainingSet
from training.queries import set_spec
from trajectories.conversation import TOOLS, RecordedStep, conversation, pair_side, prompt_messages
from trajectories.models import Trajectory

MAX_LINE_BYTES = 16 * 1024 * 1024
PREFERENCE_KEYS = ("prompt", "chosen", "rejected")
# Why rows were left out of a train file, as counted in TrainData.refused.
IDENTICAL_PAIRS = "identical_pairs"


class DataError(ValueError):
    pass


@dataclass
class TrainData:
    path: Path
    sha256: str
    rows: int
    dataset: str  # a training set's name@version, or the given file's path
    refused: dict[str, int] = field(default_factory=dict)  # rows left out, by reason (IDENTICAL_PAIRS)


def prepare(
    kind: TrainingKind,
    run_dir: Path,
    training_set: TrainingSet | None = None,
    train_file: Path | None = None,
    comparison_set: ComparisonSet | None = None,
    sides: PairSides = PairSides.TURNS,
) -> TrainData:
    """Write `<run_dir>/train.jsonl` for the kind; the same inputs always give the same file.
    `sides` is what each side of a reward or DPO pair shows (data.pair_sides)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    dest = run_dir / "train.jsonl"
    refused: Counter[str] = Counter()
    if training_set is not None:
        rows = _rows_from_set(kind, training_set, run_dir, refused, sides)
        dataset = str(training_set)
    elif comparison_set is not None:
        # People's verdicts as they stand now: the run keeps this file (and its hash), so a
        # judgement made later does not change what it trained on.
        rows = iter_preference_rows(comparison_set, refused=refused, sides=sides)
        dataset = f"comparison set {comparison_set.name}"
    elif train_file is not None:
        rows = _rows_from_file(kind, train_file, run_dir, refused)
        dataset = str(train_file)
    else:
        raise DataError("no data: give a training set, a train file or a comparison set")
    count, digest = _write(dest, rows)
    if count == 0:
        if comparison_set is not None:
            why = _refusals(refused) or ": none of its pairs has a verdict yet (judge them, or resolve the split ones)"
        else:
            why = _refusals(refused) or _why_empty(kind, training_set)
        raise DataError(f"{dataset} gives no {kind} training rows" + why)
    return TrainData(path=dest, sha256=digest, rows=count, dataset=dataset, refused=dict(refused))


def _why_empty(kind: TrainingKind, training_set: TrainingSet | None) -> str:
    if training_set is None:
        return ": the file holds no rows"
    if kind is TrainingKind.SFT:
        return (
            ": none of its trajectories has a verified reward that resolved its task (sft trains on verified "
            "successes only); freeze a set that holds some, e.g. with successes_only"
        )
    if kind in (TrainingKind.REWARD, TrainingKind.DPO):
        return (
            ": no task has two trajectories with different verified rewards to pair; freeze a set with a success "
            "and a failure of the same task (require_discrimination), or give a preference file"
        )
    return ": none of its trajectories names a stored task"


def _refusals(refused: Counter[str]) -> str:
    if not refused[IDENTICAL_PAIRS]:
        return ""
    return (
        f": {refused[IDENTICAL_PAIRS]} preference pairs were refused because chosen and rejected render the same "
        "(same steps, same submitted patch), so they teach no preference; pair trajectories whose patches differ"
    )


def distinct_sides(row: dict[str, Any], refused: Counter[str]) -> bool:
    """Whether a preference row's two sides differ as a trainer renders them; a pair that prefers a text
    to itself is counted in `refused` and must not be written."""
    if _side(row["chosen"]) != _side(row["rejected"]):
        return True
    refused[IDENTICAL_PAIRS] += 1
    return False


def _side(value: Any) -> Any:
    # A side given as text is one assistant message to the trainer (training.trainers.preferences).
    return [{"role": "assistant", "content": value}] if isinstance(value, str) else value


def _write(dest: Path, rows: Iterable[dict[str, Any]]) -> tuple[int, str]:
    digest = hashlib.sha256()
    count = 0
    tmp = dest.with_suffix(".partial")
    with tmp.open("wb") as fh:
        for row in rows:
            line = json.dumps(row, ensure_ascii=False, sort_keys=True).encode() + b"\n"
            digest.update(line)
            fh.write(line)
            count += 1
    tmp.replace(dest)
    return count, digest.hexdigest()


# --- from a verified training set -------------------------------------------------------


def _verified(training_set: TrainingSet) -> list[tuple[Trajectory, Reward]]:
    """The set's members with their reward under the set's own spec, in the set's order."""
    spec = set_spec(training_set)
    rewards = {
        r.trajectory_id: r
        for r in Reward.objects.filter(trajectory__trajectory_id__in=training_set.trajectory_ids, spec_version=spec)
    }
    members = Trajectory.objects.filter(trajectory_id__in=training_set.trajectory_ids).select_related("task")
    by_id = {str(t.trajectory_id): t for t in members}
    out = []
    for ident in training_set.trajectory_ids:
        trajectory = by_id.get(ident)
        if trajectory is not None and trajectory.pk in rewards:
            out.append((trajectory, rewards[trajectory.pk]))
    return out


def _statement(trajectory: Trajectory) -> str:
    return trajectory.task.statement if trajectory.task is not None else trajectory.prompt


def _steps(trajectory: Trajectory) -> Iterator[RecordedStep]:
    steps = trajectory.steps.order_by("step").values_list("action_type", "action_input", "thought", "observation")
    return (RecordedStep(*row) for row in steps)


def _chat(trajectory: Trajectory) -> list[dict[str, Any]]:
    return conversation(_statement(trajectory), _steps(trajectory), trajectory.language)


def _judged(trajectory: Trajectory, sides: PairSides) -> list[dict[str, Any]]:
    """One side of a pair after the prompt (the patch alone skips reading the steps)."""
    steps = _steps(trajectory) if sides is PairSides.TURNS else iter(())
    return pair_side(_statement(trajectory), steps, trajectory.patch, sides, trajectory.language)


def _rows_from_set(
    kind: TrainingKind, training_set: TrainingSet, run_dir: Path, refused: Counter[str], sides: PairSides
) -> Iterator[dict[str, Any]]:
    members = _verified(training_set)
    if kind is TrainingKind.SFT:
        # Rejection sampling: only what the verified reward says solved its task.
        for trajectory, reward in members:
            if reward.resolved:
                yield {"messages": _chat(trajectory), "tools": TOOLS, "trajectory_id": str(trajectory.trajectory_id)}
    elif kind in (TrainingKind.REWARD, TrainingKind.DPO):
        yield from _pairs(members, refused, sides)
    else:
        seen: set[str] = set()
        for trajectory, _ in members:
            if trajectory.task is None or trajectory.task_ref in seen:
                continue
            seen.add(trajectory.task_ref)
            yield _grpo_row(trajectory.task, run_dir)


def _pairs(
    members: list[tuple[Trajectory, Reward]], refused: Counter[str], sides: PairSides
) -> Iterator[dict[str, Any]]:
    """Per task, the best verified outcome against the worst, the second best against the second
    worst, ...: a pair only where the verified rewards differ, so the preference is a real one.
    Each side ends with the patch it submitted (what the verifier scored); a pair whose sides still
    render the same is refused and counted."""
    by_task: dict[str, list[tuple[Trajectory, Reward]]] = defaultdict(list)
    for member in members:
        by_task[member[0].task_ref].append(member)
    for task_ref in sorted(by_task):
        ranked = sorted(by_task[task_ref], key=lambda m: (-m[1].reward, str(m[0].trajectory_id)))
        for i in range(len(ranked) // 2):
            (best, best_reward), (worst, worst_reward) = ranked[i], ranked[-1 - i]
            if best_reward.reward <= worst_reward.reward:
                break
            row = {
                "prompt": prompt_messages(_statement(best), best.language),
                "chosen": _judged(best, sides),
                "rejected": _judged(worst, sides),
                "task_id": task_ref,
                "chosen_trajectory_id": str(best.trajectory_id),
                "rejected_trajectory_id": str(worst.trajectory_id),
                "chosen_reward": best_reward.reward,
                "rejected_reward": worst_reward.reward,
                "spec_version": best_reward.spec_version,
            }
            if distinct_sides(row, refused):
                yield row


def _grpo_row(task: Task, run_dir: Path) -> dict[str, Any]:
    return {
        "prompt": prompt_messages(task.statement, task.language),
        "task_id": task.task_id,
        "task_dir": str(write_task_dir(task, run_dir / "tasks")),
    }


def write_task_dir(task: Task, parent: Path) -> Path:
    """The task as a task directory (docs/formats.md "Task format"), for a scorer that has no database."""
    base, tests = tree_path(task.snapshot_hash), tree_path(task.tests_hash)
    if not base.is_dir() or not tests.is_dir():
        raise DataError(f"task {task.task_id}: its snapshot or tests are missing from the store under var/")
    dest = parent / task.task_id
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copytree(base, dest / "repo_snapshot")
    shutil.copytree(tests, dest / "tests")
    (dest / "task.md").write_text(task.statement)
    meta = {
        **task.metadata,
        "task_id": task.task_id,
        "test_command": task.test_command,
        "tests_dest": task.tests_dest,
        "fail_to_pass": task.fail_to_pass,
        "pass_to_pass": task.pass_to_pass,
        "visible_tests": task.visible_tests,
        "timeout_seconds": task.timeout_seconds,
        "max_steps": task.max_steps,
    }
    (dest / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    return dest


# --- from a given file --------------------------------------------------------------------


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if len(line) > MAX_LINE_BYTES:
                raise DataError(f"{path.name} line {lineno}: longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise DataError(f"{path.name} line {lineno}: not JSON") from None
            if not isinstance(row, dict):
                raise DataError(f"{path.name} line {lineno}: not a JSON object")
            yield lineno, row


def _messages(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value)


def _rows_from_file(kind: TrainingKind, path: Path, run_dir: Path, refused: Counter[str]) -> Iterator[dict[str, Any]]:
    for lineno, row in _lines(path):
        where = f"{path.name} line {lineno}"
        if kind in (TrainingKind.REWARD, TrainingKind.DPO):
            missing = [k for k in PREFERENCE_KEYS if k not in row]
            if missing:
                raise DataError(f"{where}: a preference row needs {', '.join(PREFERENCE_KEYS)}; missing {missing}")
            if not all(_messages(row[k]) or isinstance(row[k], str) for k in PREFERENCE_KEYS):
                raise DataError(f"{where}: prompt, chosen and rejected must be messages or text")
            if distinct_sides(row, refused):
                yield row
        elif kind is TrainingKind.SFT:
            yield _sft_row(row, where)
        else:
            yield _grpo_file_row(row, where, run_dir)


def _sft_row(row: dict[str, Any], where: str) -> dict[str, Any]:
    if "messages" in row:
        if not _messages(row["messages"]):
            raise DataError(f"{where}: messages must be a list of chat messages")
        return {"messages": row["messages"], "tools": row.get("tools") or TOOLS}
    if "steps" in row and isinstance(row["steps"], list):
        # A Crucible trajectory export: only verified-looking successes teach the policy.
        steps = [
            RecordedStep(
                str(s.get("action_type", "")),
                s.get("action_input"),
                str(s.get("thought") or ""),
                str(s.get("observation") or ""),
            )
            for s in row["steps"]
            if isinstance(s, dict)
        ]
        # The export's prompt may be the whole first prompt (system text included); the stored
        # task's statement is what the agent loop puts after the system prompt.
        task = Task.objects.filter(task_id=str(row.get("task_id", ""))).only("statement").first()
        statement = task.statement if task is not None else str(row.get("prompt", ""))
        return {"messages": conversation(statement, steps), "tools": TOOLS}
    raise DataError(f"{where}: an sft row needs messages, or a trajectory with steps")


def _grpo_file_row(row: dict[str, Any], where: str, run_dir: Path) -> dict[str, Any]:
    task_id = row.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise DataError(f"{where}: a grpo row needs the task_id of a stored task")
    task = Task.objects.filter(task_id=task_id).first()
    if task is None:
        raise DataError(f"{where}: no stored task {task_id[:120]!r}")
    out = _grpo_row(task, run_dir)
    if _messages(row.get("prompt")):
        out["prompt"] = row["prompt"]
    return out
