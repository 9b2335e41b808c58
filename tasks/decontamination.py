"""Keeping eval suites honest: an eval task must not be a train task in disguise.

Two signals: the same repository + file + function changed by the expected patches,
or a near-duplicate statement (Jaccard similarity of word 3-grams).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from patches import changed_functions

logger = logging.getLogger(__name__)

WORD = re.compile(r"[a-z0-9_]+")
SIMILARITY_THRESHOLD = 0.5


@dataclass(frozen=True)
class TaskView:
    task_id: str
    repo: str
    statement: str
    expected_patch: str
    base_dir: Path


@dataclass(frozen=True)
class Finding:
    eval_task: str
    train_task: str
    kind: str  # same_function | similar_statement
    detail: str


def shingles(text: str, n: int = 3) -> set[tuple[str, ...]]:
    words = WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(max(0, len(words) - n + 1))}


def jaccard(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def symbols(task: TaskView) -> set[tuple[str, str, str]]:
    if not task.expected_patch.strip():
        return set()
    try:
        changed = changed_functions(task.base_dir, task.expected_patch)
    except (OSError, SyntaxError, ValueError) as exc:
        # A task we cannot analyse still gets the statement check; it just shares no functions.
        logger.warning("decontamination: no changed functions for %s: %s", task.task_id, exc)
        return set()
    return {(task.repo, path, f.name) for path, funcs in changed.items() for f in funcs}


def check(
    eval_tasks: list[TaskView], train_tasks: list[TaskView], threshold: float = SIMILARITY_THRESHOLD
) -> list[Finding]:
    findings: list[Finding] = []
    train_symbols = {t.task_id: symbols(t) for t in train_tasks}
    train_shingles = {t.task_id: shingles(t.statement) for t in train_tasks}
    for task in eval_tasks:
        mine = symbols(task)
        own = shingles(task.statement)
        for train in train_tasks:
            shared = mine & train_symbols[train.task_id]
            if shared:
                repo, path, func = sorted(shared)[0]
                findings.append(Finding(task.task_id, train.task_id, "same_function", f"{repo}: {path}::{func}"))
            score = jaccard(own, train_shingles[train.task_id])
            if score >= threshold:
                findings.append(
                    Finding(
                        task.task_id, train.task_id, "similar_statement", f"statements {score:.0%} alike (word 3-grams)"
                    )
                )
    return findings
