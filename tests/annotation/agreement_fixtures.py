"""Comparison sets with judgements already made, for the agreement, disagreement and export tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.contrib.auth.models import User

from annotation.models import Comparison, ComparisonSet, Judgement
from tasks.models import Task
from tests.factories import StepFactory, SuiteFactory, TaskFactory, TrajectoryFactory, UserFactory
from trajectories.models import Trajectory


@dataclass
class Pair:
    votes: dict[str, str]  # reviewer username -> choice
    rewards: tuple[float | None, float | None] = (1.0, 0.0)
    reasons: dict[str, str] = field(default_factory=dict)
    when: datetime | None = None  # every judgement of the pair at this moment
    resolution: str = ""


def reviewers(*names: str) -> dict[str, User]:
    return {name: UserFactory.create(username=name, role="reviewer") for name in names}


def trajectory(task: Task, reward: float | None, label: str) -> Trajectory:
    traj = TrajectoryFactory.create(
        task=task, task_version=task.version, final_reward=reward, success=reward == 1.0, patch=f"diff {label}"
    )
    StepFactory.create(trajectory=traj, step=1, action_type="read_file", action_input="src/app.py", observation="x = 1")
    StepFactory.create(
        trajectory=traj,
        step=2,
        action_type="write_file",
        action_input={"path": "src/app.py", "content": f"x = {label}\n"},
        thought=f"write {label}",
        observation="wrote src/app.py",
    )
    StepFactory.create(trajectory=traj, step=3, action_type="submit", action_input="", observation="submitted")
    return traj


def make_set(name: str, pairs: Sequence[Pair], k: int = 2) -> ComparisonSet:
    suite = SuiteFactory.create(name=f"{name}-suite")
    cset = ComparisonSet.objects.create(name=name, suite=suite, strategy="random", reviewers_per_pair=k)
    users: dict[str, User] = {}
    for position, pair in enumerate(pairs):
        task = TaskFactory.create(suite=suite, statement=f"Fix bug {position}.")
        a = trajectory(task, pair.rewards[0], f"a{position}")
        b = trajectory(task, pair.rewards[1], f"b{position}")
        comparison = Comparison.objects.create(
            comparison_set=cset,
            task=task,
            task_ref=task.task_id,
            trajectory_a=a,
            trajectory_b=b,
            pair_key=":".join(sorted([str(a.trajectory_id), str(b.trajectory_id)])),
            position=position,
            judgement_count=len(pair.votes),
            resolution=pair.resolution,
        )
        for username, choice in pair.votes.items():
            if username not in users:
                users[username] = UserFactory.create(username=username, role="reviewer")
            judgement = Judgement.objects.create(
                comparison=comparison,
                reviewer=users[username],
                choice=choice,
                reason=pair.reasons.get(username, f"{username} prefers {choice}"),
            )
            if pair.when is not None:
                Judgement.objects.filter(pk=judgement.pk).update(created_at=pair.when)
    return cset


def day(n: int) -> datetime:
    return datetime(2026, 3, n, 12, tzinfo=UTC)
