"""`evaluate`: pass@k from real rollouts scored by a real reward worker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from core.vocabulary import ActionType, PolicyKind
from evaluation.metrics import wilson_ci
from evaluation.models import EvalRun
from evaluation.services import refresh_eval
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from training.models import Checkpoint
from trajectories.policies.base import Message, Policy, PolicyOutput, ToolCall
from trajectories.policies.registry import policy_registry


class NeverSubmits(Policy):
    """Looks around forever: the baseline that must score pass@k = 0."""

    kind = PolicyKind.SCRIPTED

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": "never-submits",
            "checkpoint": "",
            "temperature": 0.0,
            "top_p": 1.0,
            "seed": 0,
        }

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        return PolicyOutput("Still looking.", ToolCall(ActionType.RUN_COMMAND, {"command": "ls"}))


@pytest.fixture
def three_tasks(db: None, tmp_path: Path) -> TaskSuite:
    """Three demo tasks as the suite "demo": the command's pass@k path, not every task again (the
    scripted rollouts and the demo's own tests solve and score every demo task)."""
    for name in ("task_0001", "task_0002", "task_0003"):
        shutil.copytree(DEMO / "tasks" / name, tmp_path / "tasks" / name)
    import_task_dirs(tmp_path / "tasks", "demo", "train")
    return TaskSuite.objects.get(name="demo")


def evaluate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    capsys.readouterr()
    call_command("evaluate", "--suite", "demo", "--json", "--score-timeout", "120", *args, verbosity=0)
    return json.loads(capsys.readouterr().out)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_oracle_scores_pass_at_1_of_1_and_a_policy_that_never_submits_scores_0(
    three_tasks: TaskSuite, rewards_worker: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = sorted(three_tasks.tasks.values_list("task_id", flat=True))
    assert len(tasks) == 3
    oracle = evaluate(capsys, "--policy", "scripted", "--k", "1")
    assert set(oracle) == {"suite", "policy", "model", "n", "pass_at_k", "pass_hat_k", "ci95", "tasks", "warning"}
    assert (oracle["suite"], oracle["policy"], oracle["model"], oracle["n"]) == ("demo", "scripted", "oracle", 1)
    assert oracle["pass_at_k"] == {"1": 1.0} and oracle["pass_hat_k"] == {"1": 1.0}
    assert oracle["ci95"] == {"1": [pytest.approx(wilson_ci(3, 3)[0]), 1.0]}  # three tasks cannot prove 100 %
    assert oracle["warning"] == ""
    assert oracle["tasks"] == [{"task_id": t, "n": 1, "c": 1} for t in tasks]

    monkeypatch.setitem(policy_registry._factories, PolicyKind.SCRIPTED, lambda s: NeverSubmits())
    idle = evaluate(capsys, "--policy", "scripted", "--model", "never-submits", "--k", "1", "--max-steps", "2")
    assert idle["pass_at_k"] == {"1": 0.0} and idle["pass_hat_k"] == {"1": 0.0}
    assert idle["tasks"] == [{"task_id": t, "n": 1, "c": 0} for t in tasks]
    run = EvalRun.objects.order_by("-id").first()
    assert run is not None and run.status == "succeeded" and run.batch is not None
    assert set(run.batch.trajectories.values_list("termination", flat=True)) == {"max_steps"}
    assert run.batch.trajectories.filter(scored_at=None).count() == 0


@pytest.mark.django_db
def test_bad_input_is_refused_with_one_line_and_nothing_written(demo_suite: TaskSuite) -> None:
    cases = [
        (["--suite", "nope", "--policy", "scripted"], "no suite named 'nope'"),
        (["--suite", "demo", "--policy", "scripted", "--k", "1,5", "--samples", "2"], "must be at least the largest k"),
        (["--suite", "demo", "--policy", "scripted", "--k", "one"], "k must be positive whole numbers"),
        (["--suite", "demo", "--policy", "scripted", "--k", "0"], "k must be positive whole numbers"),
        (["--suite", "demo"], "give --policy"),
        (["--suite", "demo", "--checkpoint", "999"], "no checkpoint with id 999"),
        (["--suite", "demo", "--policy", "scripted", "--temperature", "9"], "temperature"),
        (["--suite", "demo", "--policy", "scripted", "--score-timeout", "0"], "--score-timeout must be a positive"),
    ]
    for args, message in cases:
        with pytest.raises(CommandError, match=message):
            call_command("evaluate", *args, verbosity=0)
    assert EvalRun.objects.count() == 0


@pytest.mark.django_db
def test_an_interrupted_evaluation_is_cancelled_not_left_to_report_a_partial_score(
    demo_suite: TaskSuite, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evaluation.management.commands.evaluate as evaluate_command

    def interrupted(pk: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate_command, "run_trajectory", interrupted)
    with pytest.raises(CommandError, match=r"interrupted: eval run \d+ cancelled"):
        call_command("evaluate", "--suite", "demo", "--policy", "scripted", verbosity=0)
    run = EvalRun.objects.get()
    assert run.status == "cancelled" and run.results == {} and run.batch is not None
    assert run.batch.status == "cancelled"
    assert refresh_eval(run).status == "cancelled"


@pytest.mark.django_db
def test_a_reward_model_checkpoint_is_not_evaluated_as_a_policy(demo_suite: TaskSuite) -> None:
    reward_model = Checkpoint.objects.create(name="rm", path="/rm", kind="reward")
    with pytest.raises(CommandError, match=f"checkpoint {reward_model.pk} is a reward model, not a policy"):
        call_command("evaluate", "--suite", "demo", "--checkpoint", str(reward_model.pk), verbosity=0)
    assert EvalRun.objects.count() == 0
