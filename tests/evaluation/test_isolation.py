"""Eval isolation: every kind of planted train/eval overlap is caught."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from django.utils import timezone

from evaluation.isolation import check_isolation
from evaluation.models import EvalRun
from evaluation.services import EvalError, start_eval
from tasks.models import Task, TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO
from training.models import Checkpoint, TrainingRun, TrainingSet
from trajectories.models import RolloutBatch, Trajectory
from trajectories.rollout_settings import RolloutSettings

EVAL = ("task_0001", "task_0008", "task_0012", "task_0013")


def plant(tmp: Path, source: str, task_id: str, **metadata: str) -> None:
    dest = tmp / task_id
    shutil.copytree(DEMO / "tasks" / source, dest)
    meta = json.loads((dest / "metadata.json").read_text())
    statement = metadata.pop("statement", None)
    meta.update({"task_id": task_id, "base_commit": f"c0ffee{len(task_id)}{task_id[-1]}", **metadata})
    (dest / "metadata.json").write_text(json.dumps(meta))
    if statement is not None:
        (dest / "task.md").write_text(statement)


def training_set(name: str, task_ids: list[str]) -> TrainingSet:
    trajectories = [
        Trajectory.objects.create(
            trajectory_id=uuid.uuid4(),
            task_ref=t,
            task=Task.objects.filter(task_id=t).first(),
            created_at=timezone.now(),
        )
        for t in task_ids
    ]
    return TrainingSet.objects.create(name=name, version=1, trajectory_ids=[str(t.trajectory_id) for t in trajectories])


@pytest.fixture
def eval_suite(db: None) -> TaskSuite:
    for task_id in EVAL:
        import_task_dirs(DEMO / "tasks" / task_id, "held-out", "eval")
    return TaskSuite.objects.get(name="held-out")


@pytest.mark.django_db
def test_each_kind_of_planted_overlap_is_caught_and_the_run_is_refused_unless_forced(
    eval_suite: TaskSuite, tmp_path: Path
) -> None:
    # A clean training history first: a task of another file and function, another statement and commit.
    import_task_dirs(DEMO / "tasks" / "task_0005", "train-pool", "train")
    training_set("clean", ["task_0005"])
    clean = check_isolation(eval_suite)
    assert clean["clean"] and clean["overlaps"] == [] and clean["sources"] == ["training set clean@1"]
    assert clean["eval_tasks"] == 4 and clean["train_tasks"] == 1

    statement_0008 = (DEMO / "tasks" / "task_0008" / "task.md").read_text()
    commit_0013 = json.loads((DEMO / "tasks" / "task_0013" / "metadata.json").read_text())["base_commit"]
    plant(tmp_path, "task_0001", "train-same-function", statement="Make parse_config tolerate odd whitespace.")
    plant(tmp_path, "task_0016", "train-similar-statement", statement=statement_0008)
    plant(
        tmp_path,
        "task_0005",
        "train-same-commit",
        repo="invledger",
        base_commit=commit_0013,
        statement="Teach parse_value about hexadecimal literals.",
    )
    import_task_dirs(tmp_path, "train-pool", "train")
    training_set("planted", ["task_0001", "train-same-function", "train-similar-statement", "train-same-commit"])
    train_file = tmp_path / "sft.jsonl"
    train_file.write_text(json.dumps({"task_id": "task_0012", "steps": []}) + "\n" + "not json\n")
    run = TrainingRun.objects.create(kind="sft", config={"data": {"train_file": str(train_file)}})
    Checkpoint.objects.create(name="ckpt-a", path="/nowhere", run=run, dataset="planted@1")

    report = check_isolation(eval_suite, Checkpoint.objects.get(name="ckpt-a"))
    found = {(o["kind"], o["eval_task"], o["train_task"]) for o in report["overlaps"]}
    assert ("task_id", "task_0001", "task_0001") in found
    assert ("task_id", "task_0012", "task_0012") in found  # seen only through a run's train_file
    assert ("same_function", "task_0001", "train-same-function") in found
    assert ("similar_statement", "task_0008", "train-similar-statement") in found
    assert ("same_commit", "task_0013", "train-same-commit") in found
    assert not report["clean"]
    assert f"run {run.pk} data.train_file {train_file}" in report["sources"]
    assert "checkpoint ckpt-a dataset planted@1" in report["sources"]
    function = next(o for o in report["overlaps"] if o["kind"] == "same_function")
    assert function["detail"] == "configkit: configkit/config.py::parse_config"
    assert function["source"] == "training set planted@1"

    with pytest.raises(EvalError, match=r"refusing to evaluate: the eval suite overlaps training data in \d+ place"):
        start_eval(eval_suite, RolloutSettings("scripted"), k_values=[1], enqueue=False)
    assert EvalRun.objects.count() == 0 and RolloutBatch.objects.count() == 0

    forced = start_eval(eval_suite, RolloutSettings("scripted"), k_values=[1], force=True, enqueue=False)
    assert forced.forced and forced.warning.startswith("FORCED despite overlap")
    assert "same_commit: task_0013 ~ train-same-commit" in forced.warning
    assert forced.isolation["clean"] is False and forced.batch is not None
