"""Reward vs pass@k in a real browser, built from real eval runs of scripted stand-in checkpoints."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from core.vocabulary import ActionType, PolicyKind
from evaluation.models import EvalRun
from tests.evaluation.helpers import finished_eval, small_suite
from training.models import Checkpoint, RunMetric, TrainingRun
from trajectories.policies.base import Message, Policy, PolicyOutput, ToolCall
from trajectories.policies.registry import policy_registry

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class GivesUp(Policy):
    kind = PolicyKind.SCRIPTED

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": "gives-up", "checkpoint": "", "temperature": 0.0, "top_p": 1.0, "seed": 0}

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        return PolicyOutput("", ToolCall(ActionType.SUBMIT, {}))


def stand_in_run(monkeypatch: pytest.MonkeyPatch) -> TrainingRun:
    """A training run whose checkpoints are scripted stand-ins, each with a real, scored eval run."""
    suite = small_suite("one-task", ("task_0001",))
    run = TrainingRun.objects.create(kind="grpo", status="succeeded", name="stand-in")
    # The training reward hardly moves...
    for step, reward in enumerate([0.10, 0.11, 0.10, 0.12, 0.11, 0.10, 0.12]):
        RunMetric.objects.create(run=run, step=step * 5, values={"reward": reward, "kl": 0.01})
    # ...while the checkpoints' pass@1 goes from 0 (a policy that gives up) to 1 (the oracle).
    with monkeypatch.context() as patched:
        patched.setitem(policy_registry._factories, PolicyKind.SCRIPTED, lambda s: GivesUp())
        evals = [finished_eval(suite, model="gives-up")]
    evals += [finished_eval(suite), finished_eval(suite)]
    for i, eval_run in enumerate(evals):
        checkpoint = Checkpoint.objects.create(name=f"stand-in-{i}", path=f"/ckpt/{i}", run=run, step=10 * (i + 1))
        EvalRun.objects.filter(pk=eval_run.pk).update(checkpoint=checkpoint)
    return run


def test_the_reward_vs_pass_at_k_page_charts_real_runs_and_names_the_diagnosis(
    live_server: Any, page: Any, reviewer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rollouts publish live events through async_to_sync, which cannot run in this thread while
    # Playwright's event loop does: the runs are made in a thread of their own.
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(stand_in_run, monkeypatch).result()

    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", reviewer.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")
    page.click("nav >> text=Evaluation")
    page.click(f"a:has-text('training run #{run.pk}')")
    page.wait_for_selector("#reward-vs-pass[data-ready='1']")
    assert page.locator("#reward-vs-pass .scatterlayer .trace").count() == 2  # reward curve + pass@1 points
    assert page.locator("#checkpoint-evals tbody tr").count() == 3
    assert page.locator("#spearman").inner_text() not in ("", "–")
    diagnosis = page.locator(".diagnosis[data-code='reward_misses_progress']")
    assert "reward stays flat while pass@k rises" in diagnosis.inner_text()
    diagnosis.locator("a").first.click()
    page.wait_for_selector("#results")
    assert page.locator("h1").inner_text().startswith("Eval run #")

    # Checkpoint comparison: the second checkpoint against the first, task by task.
    page.go_back()
    page.click("#checkpoint-evals tbody tr:nth-child(2) >> text=per-task wins / losses")
    page.wait_for_selector("#significance")
    assert page.locator("#wins").inner_text() == "1" and page.locator("#losses").inner_text() == "0"
    assert page.locator("#compare-rows tr.win a").count() == 2  # each side's sample, linked

    page.click("nav >> text=Health")
    page.wait_for_selector("#health tbody tr[data-row='reward_gamed']")
    assert page.locator("#health tbody tr").count() == 12  # the guide's eight, plus each other reward-vs-pass@k shape


def test_a_running_eval_page_reloads_itself_even_under_a_fragment(live_server: Any, page: Any, reviewer: Any) -> None:
    # Launched from a checkpoint's link (/evaluation/?checkpoint=N#launch-eval), the run's page
    # inherits #launch-eval across the redirect: a refresh to that URL would only scroll.
    suite = small_suite("one-task", ("task_0001",))
    run = EvalRun.objects.create(suite=suite, policy_kind="scripted", samples=1, k_values=[1], temperature=0.0)
    EvalRun.objects.filter(pk=run.pk).update(status="running")
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", reviewer.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Dashboard')")
    page.goto(f"{live_server.url}/evaluation/{run.pk}/#launch-eval")
    assert page.text_content("#eval-status") == "running"
    EvalRun.objects.filter(pk=run.pk).update(status="succeeded")  # as its last sample is scored
    page.wait_for_function("document.getElementById('eval-status').textContent === 'succeeded'", timeout=15_000)
