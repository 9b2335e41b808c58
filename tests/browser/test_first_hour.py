"""A new user's first hour, walked in Chromium on a fresh database, a screenshot of each step kept.

The walk starts where `make run` leaves a new installation: the demo loaded by `seed_demo`, its checks
queued by `verify_demo`, a worker per class of work as scripts/workers.sh starts them, and the admin's
password in var/. From there the user only uses the pages: the validated demo on the dashboard, a
scripted and an `hf` batch, a trajectory filtered and searched, a comparison set judged from the keyboard
(both patches in view at 1280x800), each example training config launched from the form as the form
fills it in, a checkpoint page, an evaluation launched from it, the reward-vs-pass@k page and an
export.

The installation's default model is a tiny model of the bundled one's architecture and tokenizer
(CRUCIBLE_DEFAULT_MODEL, as a user would point it at another model): every example config names it,
so each trains to a checkpoint in seconds where a step of the bundled model on a busy 2-core machine
takes minutes. The screenshots land in var/screenshots/first-hour/ of the checkout, kept by CI.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from annotation.models import Judgement
from evaluation.models import EvalRun
from tests.browser.test_compare_first_view import HEIGHT, WIDTH, assert_both_patches_in_view
from tests.conftest import REPO, start_worker
from tests.training.trainer_support import make_tiny_model
from training.models import TrainingRun
from trajectories.models import RolloutBatch, Trajectory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(1500),  # validation, rollouts and four trainings on a busy 2-core machine
]

SHOTS = REPO / "var" / "screenshots" / "first-hour"
# Demo tasks whose imported trajectories have patches other than the oracle's (a failed fix, a
# reward hack): pairs to judge.
# Short ones: a pair holds two whole trajectories, and a DPO step over the demo's 30-step one
# (9,000 tokens a side) takes minutes on CPU even for the tiny model.
TASKS = ("task_0001", "task_0008")
EXAMPLES = ("sft", "reward", "dpo", "grpo")
LONG = 600_000  # ms: a page waiting on workers, on a machine at load 10


@pytest.fixture
def installation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """`make run` on a fresh database: demo, its checks queued, workers by class, the server; its URL."""
    monkeypatch.setenv("CRUCIBLE_DEFAULT_MODEL", str(make_tiny_model(tmp_path / "tiny")))
    # The workers first: each empties its queues of earlier tests' jobs as it starts.
    workers = [
        start_worker("rollouts,rewards", name="rollouts@first-hour"),
        start_worker("training", name="training@first-hour"),
        start_worker("default", name="default@first-hour"),
    ]
    for worker in workers:
        next(worker)
    try:
        call_command("seed_demo", stdout=io.StringIO())
        call_command("verify_demo", stdout=io.StringIO())
        yield request.getfixturevalue("asgi_server")
    finally:
        for worker in workers:
            for _ in worker:
                pass


@pytest.fixture
def shot(page: Any) -> Callable[[str], None]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    count = iter(range(1, 100))

    started = time.monotonic()

    def take(name: str) -> None:
        print(f"{time.monotonic() - started:7.1f} s  {name}")  # where the walk's time goes (pytest -s)
        page.screenshot(path=str(SHOTS / f"{next(count):02d}-{name}.png"), full_page=True)

    return take


def wait_until(done: Callable[[], bool], what: str, seconds: float = LONG / 1000) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.5)


def batch_done(batch: RolloutBatch) -> bool:
    batch.refresh_from_db()
    return batch.status in ("succeeded", "failed", "cancelled")


def launch_batch(page: Any, server: str, policy: str, tasks: tuple[str, ...], max_steps: int) -> RolloutBatch:
    page.goto(f"{server}/batches/")
    page.select_option("#launch select[name=suite]", "demo")
    page.select_option("#launch select[name=policy]", policy)
    page.fill("#launch input[name=tasks]", ",".join(tasks))
    page.fill("#launch input[name=max_steps]", str(max_steps))
    page.click("#launch button[type=submit]")
    page.wait_for_selector("h1:has-text('Batch #')")
    return RolloutBatch.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))


def test_a_new_users_first_hour(installation: str, page: Any, shot: Callable[[str], None]) -> None:
    server = installation
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.set_default_timeout(60_000)  # any page of a server sharing 2 cores with rollouts and trainings
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:  # hostile demo text that ran as script would open one
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)

    # Log in with what `make run` printed (kept in var/admin_password).
    from django.conf import settings

    password = (Path(settings.VAR_DIR) / "admin_password").read_text().strip()
    page.goto(f"{server}/")
    assert "/login/" in page.url
    shot("login")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")

    # The demo checks itself on the first start: the dashboard follows, then the suite reads validated.
    page.wait_for_selector("#demo-checks tr.demo-check")
    shot("dashboard-checking-the-demo")
    page.wait_for_selector("#demo-checks:not(:has(tr))", state="attached", timeout=LONG)
    page.goto(f"{server}/tasks/demo/")
    shot("demo-suite-validated")
    assert page.locator(".badge.status-unvalidated").count() == 0
    assert page.locator("tbody .badge.status-valid").count() >= len(TASKS)

    # A scripted batch and an hf batch of the installation's model, launched from the form.
    scripted = launch_batch(page, server, "scripted", TASKS, 30)
    hf = launch_batch(page, server, "hf", TASKS[:1], 1)
    wait_until(lambda: batch_done(scripted) and batch_done(hf), "the two batches")
    page.goto(f"{server}/batches/{hf.pk}/")
    shot("hf-batch")
    assert hf.trajectories.get().status == "finished"
    page.goto(f"{server}/batches/{scripted.pk}/")
    shot("scripted-batch")
    assert scripted.trajectories.filter(success=True).count() == len(TASKS)

    # A trajectory: steps filtered by tool, then searched.
    solved = scripted.trajectories.filter(task_ref=TASKS[0]).get()
    page.goto(f"{server}/trajectories/{solved.trajectory_id}/")
    page.wait_for_selector("ol.steps li.step")
    tools = {step.action_type for step in solved.steps.all()}
    tool = sorted(tools)[0]
    page.select_option("#step-filters select[name=tool]", tool)
    page.click("#step-filters button[type=submit]")
    page.wait_for_url(f"**tool={tool}**")
    shown = page.locator("li.step").count()
    assert 0 < shown == solved.steps.filter(action_type=tool).count() < solved.step_count
    page.goto(f"{server}/trajectories/{solved.trajectory_id}/?q=parse_config")
    shot("trajectory-searched")
    assert 0 < page.locator("li.step").count() <= solved.step_count

    # A verified training set from the successes, for the sft and grpo examples.
    # The Python demo's: the Go and JavaScript suites' successes have walks of their own
    # (tests/trajectories/test_language_suites_end_to_end.py).
    page.goto(f"{server}/trajectories/?success=true&suite=demo")
    page.fill("#curate input[name=name]", "first-wins")
    page.click("#curate button[type=submit]")
    page.wait_for_url("**/training/sets/first-wins/1/")
    shot("training-set")
    wins = Trajectory.objects.filter(success=True, suite__name="demo").count()  # verified by Crucible, not claimed
    assert page.inner_text("#ts-stats").startswith(f"{wins} trajectories ({wins} successes, 0 failures)")

    # A comparison set of the three tasks, judged from the keyboard with both patches in view.
    page.goto(f"{server}/annotation/sets/new/")
    page.fill("#new-set input[name=name]", "first-pairs")
    page.select_option("#new-set select[name=suite]", "demo")
    page.fill("#new-set input[name=max_pairs]", "3")
    page.fill("#new-set input[name=per_task]", "2")
    page.click("#new-set button[type=submit]")
    page.wait_for_url("**/annotation/sets/first-pairs/")
    page.goto(f"{server}/annotation/sets/first-pairs/next/")
    judged = 0
    while "/annotation/compare/" in page.url:
        page.wait_for_selector("#pair")
        if not judged:
            shot("compare")
        assert_both_patches_in_view(page)
        page.keyboard.press("1" if judged % 2 == 0 else "2")
        page.keyboard.type("the other one edits a test")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        judged += 1
    assert judged >= 2 and Judgement.objects.filter(comparison__comparison_set__name="first-pairs").count() == judged

    # Each example config, as the form fills it in, launched and trained to a checkpoint.
    runs: dict[str, TrainingRun] = {}
    for kind in EXAMPLES:
        page.goto(f"{server}/training/")
        page.select_option("#config-example", kind)
        text = page.input_value("textarea[name=config]")
        assert f"kind: {kind}" in text
        assert ("comparison_set: first-pairs" if kind in ("reward", "dpo") else "training_set: first-wins@1") in text
        page.click("#launch-run button[type=submit]")
        page.wait_for_selector("h1:has-text('Training run #')")
        runs[kind] = TrainingRun.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    for kind, run in runs.items():
        page.goto(f"{server}/training/{run.pk}/")
        page.wait_for_function(
            "['succeeded', 'failed', 'cancelled'].includes(document.getElementById('run-status').textContent)",
            timeout=LONG,
        )
        run.refresh_from_db()
        assert run.status == "succeeded", (kind, run.error, run.log_tail[-2000:])
        page.reload()
        page.wait_for_selector("#checkpoints tr[data-checkpoint]")
        shot(f"training-{kind}")
        assert run.checkpoints.exists()
        assert run.metric_rows.exists(), kind  # its curves were logged, step by step
        if kind != "grpo":  # it learned: its loss on its own rows went down, as the page says
            assert "lower" in page.inner_text("#run-learned"), (kind, run.metrics)

    # The SFT run's checkpoint page, and an evaluation launched from it.
    checkpoint = runs["sft"].checkpoints.order_by("-step").first()
    assert checkpoint is not None
    page.goto(f"{server}/training/{runs['sft'].pk}/")
    page.click(f"#checkpoints tr[data-checkpoint='{checkpoint.pk}'] a[href$='/checkpoints/{checkpoint.pk}/']")
    page.wait_for_selector("h1:has-text('Checkpoint #')")
    assert page.locator("#lineage li.node").count() >= 3  # base, run, checkpoint
    shot("checkpoint")
    page.click("#evaluate-checkpoint")
    page.wait_for_url(f"**/evaluation/?checkpoint={checkpoint.pk}**")
    assert page.input_value("#launch-eval select[name=checkpoint]") == str(checkpoint.pk)
    page.select_option("#launch-eval select[name=suite]", "demo-adversarial")
    page.fill("#launch-eval input[name=k]", "1")
    page.fill("#launch-eval input[name=samples]", "1")
    page.fill("#launch-eval input[name=max_steps]", "1")
    page.click("#launch-eval button[type=submit]")
    page.wait_for_selector("h1:has-text('Eval run #')")
    eval_url = page.url.split("#")[0]  # the form's #launch-eval is carried across the redirect

    def eval_status() -> str:  # the badge's text as written (its CSS shows it in capitals)
        return str(page.text_content("#eval-status")).strip()

    # The page reloads itself while the run is running (and finishes it once its samples are scored).
    page.wait_for_function(
        "['succeeded', 'failed'].includes(document.getElementById('eval-status')?.textContent)", timeout=LONG
    )
    shot("evaluation")
    assert eval_status() == "succeeded"
    evaluation = EvalRun.objects.get(pk=int(eval_url.rstrip("/").rsplit("/", 1)[1]))
    rolled = list(evaluation.batch.trajectories.all()) if evaluation.batch else []
    assert rolled and all(t.policy["model"] == checkpoint.path for t in rolled)  # the checkpoint as the hf policy

    # Reward vs pass@k of the run: its chart, or the message saying what it lacks.
    page.goto(f"{server}/evaluation/training-runs/{runs['sft'].pk}/")
    page.wait_for_selector("#reward-vs-pass[data-ready='1']")  # its one evaluated checkpoint
    assert page.locator("#reward-vs-pass .scatterlayer .trace").count() == 1  # SFT logs no reward: pass@k alone
    assert page.locator("#no-reward").is_visible()
    shot("reward-vs-pass")

    # An export: the training set as JSONL, one chat per verified success.
    page.goto(f"{server}/training/sets/first-wins/1/")
    with page.expect_download() as download:
        page.click("text=export JSONL")
    rows = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines() if line.strip()]
    assert rows and all("messages" in row or "steps" in row for row in rows)
    assert Trajectory.objects.filter(success=True).count() >= len(rows)
    assert dialogs == []
