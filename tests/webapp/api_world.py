"""One row of every kind the API serves, so each endpoint has something real to show."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.contrib.auth.models import User

from annotation.models import Comparison, ComparisonSet, Judgement
from evaluation.models import EvalRun
from rewards.models import Reward, ScoringRun
from tasks.models import Task, TaskSuite
from tests.factories import StepFactory, SuiteFactory, TaskFactory, TrajectoryFactory, UserFactory
from training.models import Checkpoint, TrainingRun, TrainingSet
from trajectories.models import RolloutBatch, Trajectory

SPEC = "default@test"


@dataclass
class World:
    suite: TaskSuite
    task: Task
    batch: RolloutBatch
    good: Trajectory
    bad: Trajectory
    reward: Reward
    comparison_set: ComparisonSet
    comparison: Comparison
    judgement: Judgement
    training_set: TrainingSet
    run: TrainingRun
    checkpoint: Checkpoint
    eval_run: EvalRun
    scoring_run: ScoringRun


def build_world(researcher: User | None = None) -> World:
    author = researcher or UserFactory.create(username="world-researcher", role="researcher")
    suite = SuiteFactory.create(name="world")
    task = TaskFactory.create(suite=suite, task_id="world_0001", tags=["parsing"], validation_status="valid")
    batch = RolloutBatch.objects.create(suite=suite, policy_kind="scripted", model="oracle", status="succeeded")
    start = datetime(2026, 11, 2, 9, tzinfo=UTC)
    good = TrajectoryFactory.create(
        task=task, batch=batch, patch="--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", created_at=start
    )
    bad = TrajectoryFactory.create(
        task=task,
        batch=batch,
        final_reward=-1.0,
        success=False,
        patch="--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+c\n",
        created_at=start + timedelta(minutes=1),
    )
    for n in (1, 2):
        StepFactory.create(trajectory=good, step=n)
    reward = Reward.objects.create(trajectory=good, spec_version=SPEC, reward=1.0, resolved=True, pass_rate=1.0)
    Reward.objects.create(trajectory=bad, spec_version=SPEC, reward=-1.0, resolved=False, pass_rate=0.0)
    cset = ComparisonSet.objects.create(name="world-pairs", suite=suite, strategy="random", reviewers_per_pair=1)
    comparison = Comparison.objects.create(
        comparison_set=cset, task=task, task_ref=task.task_id, trajectory_a=good, trajectory_b=bad, pair_key="k1"
    )
    judge = UserFactory.create(username="world-reviewer", role="reviewer")
    judgement = Judgement.objects.create(comparison=comparison, reviewer=judge, choice="A", reason="passes")
    Comparison.objects.filter(pk=comparison.pk).update(judgement_count=1)
    training_set = TrainingSet.objects.create(
        name="world-sft",
        version=1,
        rule={"spec_version": SPEC},
        trajectory_ids=[str(good.trajectory_id)],
        stats={"trajectories": 1},
        created_by=author,
    )
    run = TrainingRun.objects.create(kind="sft", status="succeeded", name="world-run", created_by=author)
    checkpoint = Checkpoint.objects.create(name="world-ckpt", path="/nonexistent/world-ckpt", run=run, step=1)
    eval_run = EvalRun.objects.create(
        suite=suite,
        policy_kind="scripted",
        model="oracle",
        samples=1,
        k_values=[1],
        temperature=0.0,
        status="succeeded",
        results={"pass@1": 1.0},
    )
    return World(
        suite=suite,
        task=task,
        batch=batch,
        good=good,
        bad=bad,
        reward=reward,
        comparison_set=cset,
        comparison=comparison,
        judgement=judgement,
        training_set=training_set,
        run=run,
        checkpoint=checkpoint,
        eval_run=eval_run,
        scoring_run=ScoringRun.objects.create(filters={"suite": suite.name}, spec_version=SPEC, status="succeeded"),
    )


def unknown_uuid() -> str:
    return str(uuid.uuid4())
