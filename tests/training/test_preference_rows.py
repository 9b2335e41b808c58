"""Preference rows hold what was judged: each side ends with the patch it submitted, and a pair whose
sides render the same is refused and counted, never written."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from annotation.models import Comparison
from core.vocabulary import TrainingKind
from tests.annotation.agreement_fixtures import Pair, make_set
from tests.training.runs import config, scored, verified_set
from training.curation import CurationRule, build_training_set
from training.data import IDENTICAL_PAIRS, prepare
from training.services import RunError, create_run
from trajectories.conversation import MAX_SUBMISSION_CHARS, submission_message
from trajectories.models import Step, Trajectory

pytestmark = pytest.mark.django_db


def train_rows(run: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (Path(run.output_dir).parent / "train.jsonl").read_text().splitlines()]


def test_pairs_whose_steps_read_alike_carry_the_patch_each_side_submitted() -> None:
    verified_set()  # per task a success and a failure, both "read a file, submit", patches differ
    rows = train_rows(create_run(config("dpo"), enqueue=False))
    assert len(rows) == 2
    for row in rows:
        chosen = Trajectory.objects.get(trajectory_id=row["chosen_trajectory_id"])
        rejected = Trajectory.objects.get(trajectory_id=row["rejected_trajectory_id"])
        assert row["chosen"][-1] == {"role": "assistant", "content": f"Submitted patch:\n{chosen.patch}"}
        assert row["rejected"][-1] == {"role": "assistant", "content": f"Submitted patch:\n{rejected.patch}"}
        assert row["chosen"] != row["rejected"] and row["chosen"][:-1] == row["rejected"][:-1]


def test_a_pair_whose_sides_render_the_same_is_refused_and_counted_on_the_run() -> None:
    twins = [scored("task_a", True), scored("task_a", False)]
    Trajectory.objects.filter(pk__in=[t.pk for t in twins]).update(patch="same diff")
    scored("task_b", True)
    scored("task_b", False)
    build_training_set("oracle", CurationRule())
    run = create_run(config("reward"), enqueue=False)
    assert [r["task_id"] for r in train_rows(run)] == ["task_b"]
    assert run.metrics == {f"refused_{IDENTICAL_PAIRS}": 1.0}
    run.refresh_from_db()
    assert run.metrics == {f"refused_{IDENTICAL_PAIRS}": 1.0}  # stored: the run page shows it


def test_a_set_whose_every_pair_renders_the_same_fails_naming_the_cause() -> None:
    twins = [scored("task_a", True), scored("task_a", False)]
    Trajectory.objects.filter(pk__in=[t.pk for t in twins]).update(patch="")
    build_training_set("oracle", CurationRule())
    with pytest.raises(RunError, match="1 preference pairs were refused because chosen and rejected render the same"):
        create_run(config("dpo"), enqueue=False)


def test_a_preference_file_keeps_no_pair_that_prefers_a_text_to_itself(tmp_path: Path) -> None:
    prompt = [{"role": "user", "content": "fix it"}]
    same = {"prompt": prompt, "chosen": "x", "rejected": [{"role": "assistant", "content": "x"}]}
    good = {"prompt": prompt, "chosen": "x", "rejected": "y"}
    source = tmp_path / "pairs.jsonl"
    source.write_text(json.dumps(same) + "\n" + json.dumps(good) + "\n")
    train = prepare(TrainingKind.DPO, tmp_path / "run", train_file=source)
    assert train.rows == 1 and train.refused == {IDENTICAL_PAIRS: 1}
    assert [json.loads(line) for line in train.path.read_text().splitlines()] == [good]


def test_the_preferences_export_refuses_identical_pairs_and_says_how_many(tmp_path: Path) -> None:
    cset = make_set("twins", [Pair({"ann": "A", "ben": "A"}), Pair({"ann": "B", "ben": "B"})])
    pairs = Comparison.objects.select_related("trajectory_a", "trajectory_b").filter(comparison_set=cset)
    twin, other = pairs.order_by("position")
    a, b = twin.trajectory_a, twin.trajectory_b
    for mine, theirs in zip(Step.objects.filter(trajectory=b).order_by("step"), a.steps.order_by("step"), strict=True):
        Step.objects.filter(pk=mine.pk).update(action_input=theirs.action_input, thought=theirs.thought)
    Trajectory.objects.filter(pk=b.pk).update(patch=a.patch)
    out, stdout = tmp_path / "prefs.jsonl", io.StringIO()
    call_command("export", "preferences", "--set", "twins", "--format", "jsonl", "--out", str(out), stdout=stdout)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["pair_id"] for r in rows] == [other.pk]
    assert "1 preference pairs written" in stdout.getvalue() and "1 refused (identical pairs)" in stdout.getvalue()


def test_a_submitted_patch_is_bounded_and_an_empty_one_says_so() -> None:
    huge = submission_message("+" * (MAX_SUBMISSION_CHARS + 10))["content"]
    assert len(huge) < MAX_SUBMISSION_CHARS + 100 and huge.endswith("[... 10 more characters of the patch not shown]")
    assert submission_message("  \n")["content"] == "Submitted patch:\n(empty: no change to the repository)"
