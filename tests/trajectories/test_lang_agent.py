"""The agent in a Go and a JavaScript task: run_tests runs the task's own runner, the prompt names the
language, and the scripted oracle's rollout, through the rollouts worker's function, scores 1.0 and
makes an SFT row with the prompt the agent saw.

The tasks are tests/fixtures/lang_tasks' two, each with one visible test file added to its
base (the fixtures' bases have none, so an agent's run_tests would have nothing to run): one test
that passes at the base and one that fails until the bug is fixed.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.vocabulary import TrainingKind
from rewards.services import score_trajectory
from sandbox import Sandbox
from sandbox.backends.bwrap import BwrapBackend
from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tasks.spec import TaskSpec
from training.data import prepare
from training.models import TrainingSet
from trajectories.agent import AgentTask, prompt
from trajectories.batches import start_batch
from trajectories.rollout_settings import RolloutSettings
from trajectories.runner import run_trajectory
from trajectories.tools import run_tool

TASKS = Path(__file__).parent.parent / "fixtures" / "lang_tasks"

GO_VISIBLE = """package textutil

import "testing"

func TestVisibleReverse(t *testing.T) {
\tif got := Reverse("abc"); got != "cba" {
\t\tt.Fatalf("Reverse(abc) = %q", got)
\t}
}

func TestVisibleTruncateAccents(t *testing.T) {
\tif got := Truncate("héllo wörld", 8); got != "héllo..." {
\t\tt.Fatalf("Truncate = %q, want %q", got, "héllo...")
\t}
}
"""
JS_VISIBLE = """import { expect, test } from "vitest";
import { slugify } from "../src/slug.js";

test("visible: one word", () => {
  expect(slugify("Word")).toBe("word");
});
test("visible: punctuation", () => {
  expect(slugify("a, b")).toBe("a-b");
});
"""


@dataclass(frozen=True)
class Visible:
    task_id: str
    path: str  # the visible test file in the base
    source: str
    passing: str  # the runner's id of the test that passes at the base
    failing: str  # and of the one that fails until the fix
    named: str  # how an agent names the passing test alone in run_tests' paths
    runner_file: str  # a runner file the base has, put back before a run
    prompt_says: str


GO = Visible(
    "go_task_1",
    "textutil/visible_test.go",
    GO_VISIBLE,
    "example.com/textkit/textutil::TestVisibleReverse",
    "example.com/textkit/textutil::TestVisibleTruncateAccents",
    "./textutil::TestVisibleReverse",
    "go.mod",
    "Go repository",
)
JS = Visible(
    "js_task_1",
    "test/visible.test.js",
    JS_VISIBLE,
    "test/visible.test.js::visible: one word",
    "test/visible.test.js::visible: punctuation",
    "./test/visible.test.js::visible: one word",
    "package.json",
    "JavaScript/TypeScript repository",
)
LANGS = [pytest.param(GO, id="go"), pytest.param(JS, id="javascript")]


def task_dir(lang: Visible, tmp_path: Path) -> Path:
    dest = tmp_path / "tasks" / lang.task_id
    shutil.copytree(TASKS / lang.task_id, dest)
    visible = dest / "repo_snapshot" / lang.path
    visible.parent.mkdir(parents=True, exist_ok=True)
    visible.write_text(lang.source)
    return dest


@pytest.mark.parametrize("lang", LANGS)
def test_run_tests_runs_the_tasks_own_runner_and_counts_from_its_report(lang: Visible, tmp_path: Path) -> None:
    work = AgentTask.of(TaskSpec.from_task_dir(task_dir(lang, tmp_path)), max_steps=5)
    assert work.runner is not None and lang.prompt_says in prompt(work)[0].content
    with Sandbox(work.base_dir, BwrapBackend()) as box:
        # The agent's edit to a runner file is undone before the run, as scoring would undo it.
        (box.workspace / lang.runner_file).write_text("not what the base has\n")

        def run(args: dict[str, object]) -> tuple[str, dict[str, object] | None]:
            result = run_tool(box, "run_tests", args, work.visible_tests, work.command_timeout, work.runner)
            return result.observation, dict(result.harness_tests) if result.harness_tests else None

        text, counts = run({})
        assert counts is not None and (counts["passed"], counts["failed"], counts["valid"]) == (1, 1, True), text
        assert f"FAILED {lang.failing}" in text and f"PASSED {lang.passing}" in text
        assert f"put back as the base has them (tests always run with these): {lang.runner_file}" in text
        assert (box.workspace / lang.runner_file).read_bytes() == (work.base_dir / lang.runner_file).read_bytes()
        text, counts = run({"paths": [lang.named]})
        assert counts is not None and (counts["passed"], counts["failed"]) == (1, 0), text
        # What the agent names is checked by the runner, never run as a pattern or a path out.
        for hostile in ["../outside", "example.com/other::TestX", "textutil::Test|.*", "nope.test.js"]:
            text, counts = run({"paths": [hostile]})
            assert text.startswith("error: the test run was refused:") and counts is None, (hostile, text)


@pytest.mark.django_db
@pytest.mark.parametrize("lang", LANGS)
def test_the_scripted_oracle_solves_the_task_with_reward_1(lang: Visible, tmp_path: Path) -> None:
    import_task_dirs(task_dir(lang, tmp_path), "lang")
    batch = start_batch(TaskSuite.objects.get(name="lang"), RolloutSettings("scripted"), enqueue=False)
    pk = batch.trajectories.get().pk
    trajectory = run_trajectory(pk)  # what the rollouts worker's job runs
    assert trajectory is not None
    assert (trajectory.status, trajectory.termination) == ("finished", "submitted"), trajectory.error
    assert lang.prompt_says in trajectory.prompt
    steps = list(trajectory.steps.order_by("step"))
    assert [s.action_type for s in steps][-2:] == ["run_tests", "submit"]
    tests_step = steps[-2]
    counts = tests_step.extra["harness_tests"]
    assert (counts["passed"], counts["failed"], counts["valid"]) == (2, 0, True), tests_step.observation
    assert f"PASSED {lang.failing}" in tests_step.observation
    reward = score_trajectory(str(trajectory.trajectory_id))
    assert (reward.reward, reward.resolved) == (1.0, True)
    # Its SFT row is the chat the agent had: the system prompt of its language, not Python's.
    members = TrainingSet.objects.create(
        name="lang",
        version=1,
        rule={"spec_version": reward.spec_version},
        trajectory_ids=[str(trajectory.trajectory_id)],
    )
    train = prepare(TrainingKind.SFT, tmp_path / "run", training_set=members)
    row = json.loads(train.path.read_text().splitlines()[0])
    system = prompt_text(trajectory.prompt)
    assert lang.prompt_says in system and row["messages"][0]["content"] == system


def prompt_text(stored: str) -> str:
    """The system prompt out of a trajectory's stored prompt (system prompt, blank line, statement)."""
    return stored.split("\n\n", 1)[0]
