"""A run with an `evaluation` section has its checkpoints evaluated as it saves them.

The run trains the tiny model for real (three steps, a checkpoint each); the launcher starts an
evaluation of each checkpoint on its suite as the checkpoint is saved. Their batches are then run
and scored the way a rollout and a reward worker run them (tests/evaluation/helpers.py does the
same without a worker), and the run's reward-vs-pass@k chart has a point per checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from core.vocabulary import CheckpointKind, RunStatus
from evaluation.during_training import evaluate_saved_checkpoint
from evaluation.models import EvalRun
from evaluation.queries import reward_vs_pass_series
from evaluation.services import refresh_eval
from rewards.services import score_trajectory
from tests.conftest import client_for
from tests.evaluation.helpers import small_suite
from tests.training.trainer_support import make_tiny_model, short_sft_rows, write_jsonl
from training.config import ConfigError, check
from training.launcher import execute
from training.models import Checkpoint, TrainingRun
from training.services import create_run
from trajectories.runner import run_trajectory

pytestmark = pytest.mark.django_db

ONE_TASK = ("task_0001",)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def config(base: Path, train_file: Path, **evaluation: Any) -> dict[str, Any]:
    return {
        "kind": "sft",
        "model": {"base_model": str(base)},
        "rl": {"max_steps": 3, "batch_size": 2, "learning_rate": "1e-5"},
        "data": {"train_file": str(train_file)},
        "logging": {"save_every_steps": 1},
        "evaluation": {"suite": "during-training", "k": 1, "max_steps": 1, "max_new_tokens": 16, **evaluation},
    }


def test_each_saved_checkpoint_is_evaluated_and_fills_the_reward_vs_pass_chart(
    researcher: User, tiny: Path, tmp_path: Path
) -> None:
    small_suite("during-training", ONE_TASK)
    run = create_run(config(tiny, write_jsonl(tmp_path / "sft.jsonl", short_sft_rows())), researcher, enqueue=False)
    execute(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    checkpoints = list(run.checkpoints.order_by("step"))
    assert [c.step for c in checkpoints] == [1, 2, 3]
    evaluations = list(EvalRun.objects.filter(checkpoint__run=run).order_by("checkpoint__step"))
    assert [e.checkpoint_id for e in evaluations] == [c.pk for c in checkpoints]
    for evaluation, checkpoint in zip(evaluations, checkpoints, strict=True):
        assert evaluation.suite.name == "during-training" and evaluation.model == checkpoint.path
        assert evaluation.batch is not None and (evaluation.batch.max_steps, evaluation.batch.max_new_tokens) == (1, 16)
        assert f"evaluation {evaluation.pk} on during-training started" in run.log_tail

    # What the rollout and reward workers do with the batches the launcher queued.
    for evaluation in evaluations:
        assert evaluation.batch is not None
        for trajectory in evaluation.batch.trajectories.order_by("id"):
            run_trajectory(trajectory.pk)
            score_trajectory(str(trajectory.trajectory_id))
        assert refresh_eval(evaluation).status == EvalRun.Status.SUCCEEDED

    _, points = reward_vs_pass_series(run)
    assert [p.step for p in points] == [1.0, 2.0, 3.0]
    assert all(p.low < p.high for p in points)  # an interval, even with no success
    page = client_for(researcher).get(f"/evaluation/training-runs/{run.pk}/").content.decode()
    assert page.count(f"/evaluation/{evaluations[0].pk}/") >= 1 and "no data" not in page.lower()


def test_every_nth_checkpoint_and_what_is_not_evaluated_says_why(researcher: User, tiny: Path, tmp_path: Path) -> None:
    small_suite("during-training", ONE_TASK)
    checked = check(config(tiny, write_jsonl(tmp_path / "sft.jsonl", short_sft_rows()), every=2))
    run = TrainingRun.objects.create(name="every-second", kind="sft", config=checked.config, created_by=researcher)
    saved = [
        Checkpoint.objects.create(name=f"step {step}", kind=CheckpointKind.POLICY, path=str(tiny), run=run, step=step)
        for step in (1, 2, 3, 4)
    ]
    lines = [evaluate_saved_checkpoint(checkpoint) for checkpoint in saved]
    assert [bool(line) for line in lines] == [False, True, False, True], lines
    assert EvalRun.objects.filter(checkpoint__run=run).count() == 2

    # A run that trained on the suite's own task: refused (never forced), and the log says why.
    seen = write_jsonl(tmp_path / "seen.jsonl", [{**short_sft_rows(1)[0], "task_id": ONE_TASK[0]}])
    run.config = {
        **run.config,
        "data": {"train_file": str(seen)},
        "evaluation": {**run.config["evaluation"], "every": 1},
    }
    run.save(update_fields=["config"])
    overlapping = Checkpoint.objects.create(name="step 5", kind=CheckpointKind.POLICY, path=str(tiny), run=run, step=5)
    line = evaluate_saved_checkpoint(overlapping)
    assert line.startswith(f"checkpoint {overlapping.pk} (step 5) not evaluated: refusing to evaluate"), line
    assert ONE_TASK[0] in line and not EvalRun.objects.filter(checkpoint=overlapping).exists()

    # The suite was deleted since the run was checked: the log says so, the run goes on.
    run.config = {**run.config, "evaluation": {**run.config["evaluation"], "suite": "gone"}}
    run.save(update_fields=["config"])
    gone = Checkpoint.objects.create(name="step 6", kind=CheckpointKind.POLICY, path=str(tiny), run=run, step=6)
    assert evaluate_saved_checkpoint(gone) == f"checkpoint {gone.pk} (step 6) not evaluated: no task suite named 'gone'"


@pytest.mark.parametrize(
    ("evaluation", "key", "message"),
    [
        ({"suite": "nowhere"}, "evaluation.suite", "no task suite named 'nowhere'"),
        ({"every": 0}, "evaluation.every", "positive whole number"),
        ({"k": [1, 0]}, "evaluation.k", "positive whole number"),
        ({"k": [1, 4], "samples": 2}, "evaluation.samples", "at least the largest k (4)"),
        ({"max_new_tokens": 10**9}, "evaluation", "max new tokens"),
        ({"sandbox": "none"}, "evaluation", "sandbox must be"),
        ({"policy": "openai"}, "evaluation.policy", "unknown key"),
    ],
)
def test_a_bad_evaluation_section_is_refused_with_its_field(
    tiny: Path, tmp_path: Path, evaluation: dict[str, Any], key: str, message: str
) -> None:
    small_suite("during-training", ONE_TASK)
    with pytest.raises(ConfigError) as refused:
        check(config(tiny, write_jsonl(tmp_path / "sft.jsonl", short_sft_rows()), **evaluation))
    assert message in refused.value.errors.get(key, ""), refused.value.errors


def test_a_reward_model_run_is_not_evaluated_as_a_policy(tiny: Path, tmp_path: Path) -> None:
    small_suite("during-training", ONE_TASK)
    raw = {**config(tiny, write_jsonl(tmp_path / "pairs.jsonl", []), k=1), "kind": "reward"}
    with pytest.raises(ConfigError) as refused:
        check(raw)
    assert "not evaluated as a policy" in refused.value.errors["evaluation"]
