"""Scored trajectories with patches, and comparison sets drawn from them, for the pair tests."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from annotation.models import ComparisonSet
from annotation.pairs import PairRequest, draw_pairs
from rewards.models import Reward
from tasks.models import Task, TaskSuite
from tests.factories import SuiteFactory, TaskFactory, TrajectoryFactory
from trajectories.models import RolloutBatch, Trajectory

SPEC = "spec-test-1"


def diff(body: str, path: str = "src/app.py", old: str = "    return 0") -> str:
    """A one-hunk git diff that replaces `old` by the lines of `body` in `path`."""
    added = "".join(f"+{line}\n" for line in body.split("\n"))
    n = len(body.split("\n"))
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,{n + 1} @@\n def f():\n-{old}\n{added}"
    )


def scored(
    task: Task,
    patch: str,
    *,
    reward: float = 1.0,
    success: bool = True,
    f2p: tuple[int, int] = (1, 1),
    p2p: tuple[int, int] = (2, 2),
    batch: RolloutBatch | None = None,
    model: str = "model-x",
    kind: str = "scripted",
    checkpoint: str = "",
    with_reward_row: bool = True,
    **fields: Any,
) -> Trajectory:
    """A finished trajectory that Crucible scored (verified), with its reward row and test counts."""
    trajectory: Trajectory = TrajectoryFactory.create(
        task=task,
        patch=patch,
        final_reward=reward,
        success=success,
        scored_spec=SPEC,
        scored_at=timezone.now(),
        batch=batch,
        policy_kind=kind,
        policy_model=model,
        policy={"kind": kind, "model": model, "checkpoint": checkpoint},
        **fields,
    )
    if with_reward_row:
        Reward.objects.create(
            trajectory=trajectory,
            spec_version=SPEC,
            reward=reward,
            resolved=success,
            pass_rate=f2p[0] / max(1, f2p[1]),
            tests={
                "fail_to_pass": {"passed": f2p[0], "total": f2p[1]},
                "pass_to_pass": {"passed": p2p[0], "total": p2p[1]},
            },
        )
    return trajectory


def suite_with_pairs(tasks: int = 5, per_task: int = 2, name: str = "pairs-suite") -> TaskSuite:
    """`tasks` tasks with `per_task` distinct scored patches each."""
    suite: TaskSuite = SuiteFactory.create(name=name)
    for t in range(tasks):
        task = TaskFactory.create(suite=suite, task_id=f"{name}-task-{t}", statement=f"Fix bug number {t}.")
        for i in range(per_task):
            scored(task, diff(f"    return {t * 100 + i + 1}"), reward=1.0 - i * 0.1)
    return suite


def comparison_set(
    name: str = "set-1", tasks: int = 5, reviewers: int = 1, suite: TaskSuite | None = None, **options: Any
) -> ComparisonSet:
    """A set of one pair per task (two patches per task), drawn at random."""
    suite = suite or suite_with_pairs(tasks=tasks, name=f"{name}-suite")
    request = PairRequest(name=name, suite=suite.name, strategy="random", max_pairs=100, reviewers=reviewers, **options)
    return draw_pairs(request)


HOSTILE = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'
SECRETS = ("secret-model-7f3a", "ckpt-step-9d2e", "openai", "0.7312", "0.2718")


def secret_pair(name: str = "blind") -> tuple[ComparisonSet, list[str]]:
    """One pair whose policies, checkpoints, batch and rewards are all distinctive strings, with a
    hostile patch and statement; returns the set and every string a blind page must not show."""
    suite: TaskSuite = SuiteFactory.create(name=f"{name}-suite")
    batch = RolloutBatch.objects.create(suite=suite, policy_kind="openai", model="secret-model-7f3a")
    task = TaskFactory.create(suite=suite, task_id=f"{name}-task", statement=f"Fix the parser. {HOSTILE}")
    a = scored(
        task,
        diff(f"    return '{HOSTILE}'", path="src/parser.py"),
        reward=0.7312,
        batch=batch,
        kind="openai",
        model="secret-model-7f3a",
        checkpoint="ckpt-step-9d2e",
        f2p=(3, 3),
    )
    b = scored(
        task, diff("    return parse(text) or {}", path="src/parser.py"), reward=0.2718, success=False, f2p=(1, 3)
    )
    cset = draw_pairs(PairRequest(name=name, suite=suite.name, strategy="random", max_pairs=5))
    secrets = [*SECRETS, f"/batches/{batch.pk}/", f'"batch": {batch.pk}', str(a.trajectory_id), str(b.trajectory_id)]
    return cset, secrets
