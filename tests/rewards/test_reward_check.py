"""The suite page's "Check the reward": reward_sanity's gap per task, as a background job with a row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django import DjangoCaptureOnCommitCallbacks

from rewards import services
from rewards.models import RewardCheck, RewardSanity
from rewards.sanity import SanityResult
from tasks.models import Task, TaskSuite
from tests.conftest import client_for
from tests.factories import SuiteFactory, TaskFactory
from webapp.celery import app

pytestmark = pytest.mark.django_db

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def suite() -> TaskSuite:
    suite = SuiteFactory.create(name="gaps")
    TaskFactory.create(suite=suite, task_id="task_good", expected_patch="diff --git a/x b/x\n")
    TaskFactory.create(suite=suite, task_id="task_blind", expected_patch="diff --git a/y b/y\n")
    TaskFactory.create(suite=suite, task_id="task_unpatched", expected_patch="")
    return suite


def fake_check(task: Any, expected_patch: str, spec: Any, backend: Any) -> SanityResult:
    # The sandbox runs are reward_sanity's own tests; here the reward is "blind" on one task.
    blind = task.task_id == "task_blind"
    return SanityResult(task.task_id, expected=1.0, empty=1.0 if blind else 0.0, stubs={"pass": 0.0})


@pytest.fixture
def eager_jobs() -> Iterator[None]:
    app.conf.task_always_eager = True  # the job the button sends runs here, now
    try:
        yield
    finally:
        app.conf.task_always_eager = False


def press(client: Any, suite: str, on_commit: DjangoCaptureOnCommitCallbacks) -> Any:
    """Press the button, let the job run once the request commits, then follow back to the suite page."""
    with on_commit(execute=True):
        pressed = client.post(f"/rewards/suites/{suite}/check/")
    assert pressed.status_code == 302 and pressed["Location"] == f"/tasks/{suite}/"
    return client.get(pressed["Location"])


def test_the_button_checks_the_reward_in_the_background_and_the_page_shows_the_result(
    suite: TaskSuite,
    researcher: User,
    monkeypatch: pytest.MonkeyPatch,
    eager_jobs: None,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    monkeypatch.setattr(services, "task_spec_for", lambda task: task)
    monkeypatch.setattr(services, "check_task", fake_check)
    client = client_for(researcher)
    before = client.get("/tasks/gaps/").content.decode()
    validate, check = before.index("Validate this suite</button>"), before.index("Check the reward</button>")
    assert validate < check < before.index("</section>", validate)  # beside it, in the same card
    page = press(client, "gaps", django_capture_on_commit_callbacks)
    assert page.status_code == 200 and page["Content-Type"] == "text/html; charset=utf-8"
    run = RewardCheck.objects.get()
    assert run.status == RewardCheck.Status.SUCCEEDED and (run.done, run.total) == (2, 2)
    assert run.blind == ["task_blind"] and run.created_by == researcher
    assert set(RewardSanity.objects.values_list("task__task_id", flat=True)) == {"task_good", "task_blind"}
    html = page.content.decode()
    assert f"Reward check #{run.pk} queued for 2 tasks." in html
    assert "the reward cannot tell good from bad code on 1 of 2 tasks (task_blind)" in html
    assert 'class="badge ok"' in html and 'class="badge bad"' in html  # the gap column, filled in
    status = client.get(f"/rewards/suites/gaps/check/{run.pk}/").content.decode()
    assert "succeeded" in status and "hx-get" not in status and "show the gaps" in status


def test_a_running_check_is_polled_and_a_failed_one_says_why_escaped(
    suite: TaskSuite,
    researcher: User,
    eager_jobs: None,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    queued = RewardCheck.objects.create(suite=suite, spec_version="v", total=2)
    client = client_for(researcher)
    polling = client.get("/tasks/gaps/").content.decode()
    assert f'hx-get="/rewards/suites/gaps/check/{queued.pk}/"' in polling and "queued (0 of 2 tasks)" in polling
    Task.objects.filter(task_id="task_good").update(task_id=HOSTILE)
    # No trees in the store for these tasks: the check fails, naming the task.
    html = press(client, "gaps", django_capture_on_commit_callbacks).content.decode()
    failed = RewardCheck.objects.first()
    assert failed is not None and failed.status == RewardCheck.Status.FAILED and HOSTILE in failed.error
    assert HOSTILE not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_only_a_researcher_may_check_and_a_suite_without_expected_patches_is_refused_on_its_page(
    suite: TaskSuite, researcher: User, reviewer: User
) -> None:
    reviewing = client_for(reviewer)
    assert "Check the reward</button>" not in reviewing.get("/tasks/gaps/").content.decode()
    assert reviewing.post("/rewards/suites/gaps/check/").status_code == 403
    SuiteFactory.create(name="bare")
    page = client_for(researcher).post("/rewards/suites/bare/check/", follow=True)
    html = page.content.decode()
    assert page.status_code == 200 and "<nav>" in html
    assert html.count("No task of this suite has an expected patch to check the reward against.") == 1
    assert not RewardCheck.objects.exists()
