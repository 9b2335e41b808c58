"""The demo's Go and JavaScript suites go through the loop the Python demo does, through the API and
the pages: a scripted batch launched over the API solves its task (reward 1.0 from the real runner in
the sandbox), a wrong patch scores 0, the two are drawn as a pair, judged, and read back as a
preference row; a training set frozen over the API gives SFT rows; an evaluation launched over the
API on another task of the suite finishes with pass@1 = 1, and is refused once that task's repository
is in a training set. Every chat built on the way (transcript,
SFT row, preference row) has the system prompt of the task's language.

One task per step keeps it to a few sandboxed runs per language (rollout, scoring, evaluation)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from core.vocabulary import TrainingKind
from evaluation.models import EvalRun
from evaluation.services import refresh_eval
from rewards.services import score_trajectory
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, client_for
from training.data import prepare
from training.models import TrainingSet
from trajectories.agent import system_prompt
from trajectories.exports import iter_trajectory_lines
from trajectories.models import RolloutBatch, Trajectory
from trajectories.runner import run_trajectory
from trajectories.services import store_trajectory

pytestmark = pytest.mark.django_db
SUITES = {"go": ("go_tasks", "go_0001", "go_0002"), "javascript": ("js_tasks", "js_0001", "js_0002")}


def post(client: Client, url: str, body: object) -> Any:
    response = client.post(url, body, content_type="application/json")
    assert response.status_code in (200, 201), (url, response.content[:500])
    return response.json()


def _wrong(good: Trajectory) -> Trajectory:
    """The same steps with a patch that leaves the bug in (a comment added to the file the fix
    changes): the reward service's real run gives it 0."""
    record = json.loads(next(iter_trajectory_lines(Trajectory.objects.filter(pk=good.pk))))
    path = good.patch.splitlines()[0].split(" b/", 1)[1]  # diff --git a/PATH b/PATH
    patch = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -0,0 +1 @@\n+// looked here\n"
    record.update(trajectory_id=str(uuid.uuid4()), patch=patch, final_reward=None, success=None)
    return store_trajectory(record, "test")


@pytest.mark.parametrize("language", list(SUITES))
def test_a_language_suite_goes_through_batch_pairs_sft_and_evaluation(
    language: str, researcher: User, reviewer: User, tmp_path: Path
) -> None:
    folder, task_id, eval_task_id = SUITES[language]
    suite = f"lang-{language}"
    import_task_dirs(DEMO / folder / task_id, suite, "train")
    import_task_dirs(DEMO / folder / eval_task_id, f"{suite}-eval", "eval")
    prompt = system_prompt(language)
    client = client_for(researcher)

    # A scripted batch over the API, run as the rollouts worker runs it, scored by the reward service.
    batch = post(client, "/api/v1/batches/", {"suite": suite, "policy": "scripted", "tasks": [task_id]})
    good = RolloutBatch.objects.get(pk=batch["id"]).trajectories.get()
    run_trajectory(good.pk)
    good.refresh_from_db()
    assert good.status == "finished", good.error
    assert score_trajectory(str(good.trajectory_id)).reward == 1.0
    transcript = client.get(reverse("trajectories:transcript", args=[good.trajectory_id])).content.decode()
    assert prompt.splitlines()[0] in transcript
    assert client.get(reverse("batches:detail", args=[batch["id"]])).status_code == 200

    bad = _wrong(good)
    assert score_trajectory(str(bad.trajectory_id)).reward <= 0

    # The pair, drawn and judged over the API, read back as a preference row in the task's language.
    post(client, "/api/v1/comparison-sets/", {"name": f"pairs-{language}", "suite": suite, "strategy": "random"})
    judge = client_for(reviewer)
    shown = judge.get("/api/v1/comparisons/next/", {"set": f"pairs-{language}"}).json()
    assert judge.get(reverse("annotation:compare", args=[shown["id"]])).status_code == 200
    choice = "A" if shown["left"]["patch"] == good.patch else "B"
    post(judge, f"/api/v1/comparisons/{shown['id']}/judgements/", {"choice": choice, "reason": "fixes the bug"})
    verdicts = client.get(f"/api/v1/preference-sets/pairs-{language}/pairs/").json()["results"]
    assert len(verdicts) == 1
    exported = client.get("/api/v1/exports/preferences/", {"set": f"pairs-{language}"})
    body = b"".join(exported.streaming_content)  # type: ignore[attr-defined]
    rows = [json.loads(line) for line in body.splitlines()]
    assert len(rows) == 1 and rows[0]["prompt"][0]["content"] == prompt

    # An evaluation over the API on the eval suite, run and scored as the workers would.
    launched = post(client, "/api/v1/eval-runs/", {"suite": f"{suite}-eval", "policy": "scripted", "k": "1"})
    run = EvalRun.objects.get(pk=launched["id"])
    assert run.batch is not None
    for trajectory in run.batch.trajectories.all():
        run_trajectory(trajectory.pk)
        score_trajectory(str(trajectory.trajectory_id))
    run = refresh_eval(run)
    assert run.status == EvalRun.Status.SUCCEEDED, run.error
    assert run.results["pass_at_k"]["1"] == 1.0, run.results
    assert client.get(f"/api/v1/eval-runs/{run.pk}/").json()["status"] == "succeeded"
    assert client.get(reverse("evaluation:detail", args=[run.pk])).status_code == 200
    # A training set frozen over the API: its SFT row is the chat the agent had.
    frozen = post(
        client,
        "/api/v1/training-sets/",
        {"name": f"sft-{language}", "filter": {"suite": suite}, "successes_only": True},
    )
    assert frozen["trajectory_ids"] == [str(good.trajectory_id)]
    members = TrainingSet.objects.get(name=f"sft-{language}", version=frozen["version"])
    train = prepare(TrainingKind.SFT, tmp_path / "run", training_set=members)
    row = json.loads(train.path.read_text().splitlines()[0])
    assert row["messages"][0]["content"] == prompt

    # From now on the eval suite shares a commit with training data: a new evaluation is refused.
    refused = client.post(
        "/api/v1/eval-runs/",
        {"suite": f"{suite}-eval", "policy": "scripted", "k": "1"},
        content_type="application/json",
    )
    assert refused.status_code == 400 and "overlaps training data" in refused.json()["detail"]
    assert TaskSuite.objects.get(name=suite).tasks.get().language == language
