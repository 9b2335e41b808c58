"""Reward and DPO runs take a comparison set as their data, straight from the launch form.

The run's train file is the set's verdicts as they stand when the run is created (the rows the
preferences export writes), so a judgement made later does not change what the run trained on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User

from annotation.models import Comparison, ComparisonSet, Judgement
from annotation.preferences import iter_preference_rows
from core.vocabulary import CheckpointKind, RunStatus
from evaluation.isolation import seen_tasks
from tests.annotation.agreement_fixtures import Pair, make_set
from tests.conftest import client_for
from tests.training.trainer_support import make_tiny_model
from training.launcher import execute
from training.models import TrainingRun
from training.services import run_dir
from trajectories.conversation import submission_message
from trajectories.models import Step, Trajectory

pytestmark = pytest.mark.django_db

VOTES = [
    Pair({"ann": "A", "ben": "A"}),
    Pair({"ann": "B", "ben": "B"}),
    Pair({"ann": "A", "ben": "B"}, resolution="A"),
    Pair({"ann": "A"}),  # waits for its second reviewer: no verdict yet
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def raw(kind: str, base: Path, data: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": kind,
        "model": {"base_model": str(base)},
        "rl": {"max_steps": 1, "batch_size": 2, "learning_rate": "1e-5"},
        "data": data,
        "logging": {"save_every_steps": 1},
    }


def launch(user: User, config: dict[str, Any]) -> tuple[int, str]:
    response = client_for(user).post("/training/", {"config": yaml.safe_dump(config)})
    return response.status_code, response.content.decode() if response.status_code != 302 else response["Location"]


def test_a_reward_run_from_the_form_trains_on_the_sets_verdicts_frozen_at_launch(researcher: User, tiny: Path) -> None:
    cset = make_set("judged-pairs", VOTES)
    status, location = launch(researcher, raw("reward", tiny, {"comparison_set": cset.name}))
    assert status == 302, location
    run = TrainingRun.objects.get(pk=int(location.rstrip("/").rsplit("/", 1)[1]))
    assert run.dataset == "comparison set judged-pairs" and run.config["data"] == {
        "comparison_set": "judged-pairs",
        "pair_sides": "turns",  # the default, kept: the run says what its pairs showed
    }
    written = [json.loads(line) for line in (run_dir(run) / "train.jsonl").read_text().splitlines()]
    assert [row["verdict"] for row in written] == ["A", "B", "A"]  # the fourth pair has no verdict yet
    assert written == [json.loads(json.dumps(row)) for row in iter_preference_rows(cset)]

    # A judgement after the launch changes the set, not the run's data.
    last = Comparison.objects.get(comparison_set=cset, position=3)
    Judgement.objects.create(comparison=last, reviewer=User.objects.get(username="ben"), choice="A", reason="late")
    assert len(list(iter_preference_rows(cset))) == 4
    assert len((run_dir(run) / "train.jsonl").read_text().splitlines()) == 3

    execute(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    checkpoint = run.checkpoints.get()
    assert checkpoint.kind == CheckpointKind.REWARD and checkpoint.dataset == "comparison set judged-pairs"


def test_what_a_comparison_set_cannot_train_is_refused_by_field(researcher: User, tiny: Path) -> None:
    make_set("judged-pairs", VOTES)
    ComparisonSet.objects.create(name="unjudged", strategy="random")
    cases = [
        (raw("sft", tiny, {"comparison_set": "judged-pairs"}), "verdicts train reward and dpo runs, not sft"),
        (raw("dpo", tiny, {"comparison_set": "nowhere"}), "no comparison set &#x27;nowhere&#x27;"),
        (
            raw("dpo", tiny, {"comparison_set": "judged-pairs", "training_set": "x"}),
            "data.train_file, data.comparison_set: not both training_set and comparison_set",
        ),
        (raw("dpo", tiny, {"comparison_set": "unjudged"}), "none of its pairs has a verdict yet"),
        (raw("dpo", tiny, {"comparison_set": "judged-pairs", "pair_sides": "steps"}), "must be one of turns, patch"),
        (raw("sft", tiny, {"training_set": "x", "pair_sides": "patch"}), "shapes the pairs of reward and dpo runs"),
    ]
    for config, message in cases:
        status, page = launch(researcher, config)
        assert status == 400 and message in page, (config["data"], page[-3000:])
    assert not TrainingRun.objects.exists()


def test_a_comparison_set_run_counts_its_pairs_tasks_as_seen(researcher: User, tiny: Path) -> None:
    cset = make_set("judged-pairs", VOTES)
    status, _ = launch(researcher, raw("dpo", tiny, {"comparison_set": cset.name}))
    assert status == 302
    seen = dict(seen_tasks())
    run = TrainingRun.objects.get()
    tasks = seen[f"run {run.pk} data.comparison_set judged-pairs"]
    assert tasks == set(Comparison.objects.filter(comparison_set=cset).values_list("task_ref", flat=True))


def test_the_forms_examples_name_this_installations_data(researcher: User) -> None:
    client = client_for(researcher)
    before = client.get("/training/").content.decode()
    assert "comparison_set: judged-pairs" not in before
    make_set("judged-pairs", VOTES)
    examples = client.get("/training/").context["examples"]
    assert "comparison_set: judged-pairs" in examples["reward"] and "comparison_set: judged-pairs" in examples["dpo"]
    assert "training_set: my-verified-set" in examples["sft"]  # no verified set here yet: a placeholder


def test_a_dpo_run_on_patch_sides_trains_on_each_sides_patch_alone(researcher: User, tiny: Path) -> None:
    cset = make_set("long-pairs", VOTES)
    for trajectory in Trajectory.objects.all():  # long trajectories: each side thousands of characters of turns
        for number in range(100, 120):
            observation = f"{trajectory.patch}: step {number} output " + "x" * 400
            Step.objects.create(
                trajectory=trajectory, step=number, action_type="run_tests", action_input={}, observation=observation
            )
    status, location = launch(researcher, raw("dpo", tiny, {"comparison_set": cset.name, "pair_sides": "patch"}))
    assert status == 302, location
    run = TrainingRun.objects.get(pk=int(location.rstrip("/").rsplit("/", 1)[1]))
    assert run.config["data"]["pair_sides"] == "patch"
    written = [json.loads(line) for line in (run_dir(run) / "train.jsonl").read_text().splitlines()]
    assert [row["verdict"] for row in written] == ["A", "B", "A"]
    for row, pair in zip(written, Comparison.objects.filter(comparison_set=cset).order_by("position"), strict=False):
        chosen, rejected = (
            (pair.trajectory_a, pair.trajectory_b) if row["verdict"] == "A" else (pair.trajectory_b, pair.trajectory_a)
        )
        assert row["chosen"] == [submission_message(chosen.patch)]
        assert row["rejected"] == [submission_message(rejected.patch)]
    turns = list(iter_preference_rows(cset))
    assert len(json.dumps(turns[0]["chosen"])) > 20 * len(json.dumps(written[0]["chosen"]))

    execute(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.log_tail
    assert run.checkpoints.get().kind == CheckpointKind.POLICY
