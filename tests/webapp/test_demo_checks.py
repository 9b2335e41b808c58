"""The demo verified on its first start: `manage.py verify_demo` (run.sh) queues a validation run and a
reward check of each demo suite once, and the dashboard follows them until they are done."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from pytest_django import DjangoCaptureOnCommitCallbacks

from rewards.jobs import reward_check_job
from rewards.models import RewardCheck
from tasks.jobs import validate_suite_job
from tasks.models import TaskSuite, ValidationRun
from tests.conftest import client_for
from tests.factories import SuiteFactory, TaskFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_suites() -> list[TaskSuite]:
    suites = [SuiteFactory.create(name="demo"), SuiteFactory.create(name="demo-adversarial")]
    for suite in suites:
        for n in range(2):
            TaskFactory.create(suite=suite, task_id=f"{suite.name}_{n}", expected_patch=f"diff --git a/{n} b/{n}\n")
    TaskFactory.create(suite=SuiteFactory.create(name="mine"), expected_patch="diff --git a/m b/m\n")
    return suites


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The jobs sent to the workers, in order; none runs (no worker here)."""
    jobs: list[tuple[str, int]] = []
    monkeypatch.setattr(validate_suite_job, "delay", lambda pk: jobs.append(("validate", pk)))
    monkeypatch.setattr(reward_check_job, "delay", lambda pk: jobs.append(("reward", pk)))
    return jobs


def test_the_first_start_queues_a_validation_and_a_reward_check_of_each_demo_suite_once(
    demo_suites: list[TaskSuite],
    sent: list[tuple[str, int]],
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        call_command("verify_demo")
    assert "demo checks queued" in capsys.readouterr().out
    runs = {run.suite.name: run for run in ValidationRun.objects.select_related("suite")}
    checks = {check.suite.name: check for check in RewardCheck.objects.select_related("suite")}
    assert set(runs) == set(checks) == {"demo", "demo-adversarial"}  # not the suite someone else imported
    assert all(run.status == "queued" and run.total == 2 for run in runs.values())
    assert all(check.status == "queued" and check.total == 2 for check in checks.values())
    assert sorted(sent) == sorted(
        [("validate", run.pk) for run in runs.values()] + [("reward", check.pk) for check in checks.values()]
    )

    with django_capture_on_commit_callbacks(execute=True):
        call_command("verify_demo")  # the second `make run`
    assert capsys.readouterr().out == ""
    assert ValidationRun.objects.count() == 2 and RewardCheck.objects.count() == 2 and len(sent) == 4


def test_a_demo_validated_from_its_page_before_gets_only_the_missing_check(
    demo_suites: list[TaskSuite],
    sent: list[tuple[str, int]],
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    ValidationRun.objects.create(suite=demo_suites[0], status="succeeded", total=2, done=2)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("verify_demo")
    assert ValidationRun.objects.filter(suite=demo_suites[0]).count() == 1
    assert [kind for kind, _ in sent].count("validate") == 1 and [kind for kind, _ in sent].count("reward") == 2


def test_the_dashboard_shows_the_demo_checks_until_they_are_done(demo_suites: list[TaskSuite], reviewer: User) -> None:
    demo, adversarial = demo_suites
    run = ValidationRun.objects.create(suite=demo, status="running", total=2, done=1)
    ValidationRun.objects.create(suite=adversarial, status="succeeded", total=2, done=2)
    check = RewardCheck.objects.create(suite=demo, spec_version="v1", status="queued", total=2)
    client = client_for(reviewer)

    html = client.get("/").content.decode()
    section = html[html.index('<section id="demo-checks"') : html.index("</section>", html.index('id="demo-checks"'))]
    assert 'hx-trigger="every 3s"' in section  # it polls while something is left
    rows = section.split('<tr class="demo-check">')[1:]
    assert len(rows) == 3
    assert 'href="/tasks/demo/">demo</a>' in rows[0] and "validation" in rows[0]
    assert ">running<" in rows[0] and "1 of 2 tasks" in rows[0]
    assert "reward check" in rows[1] and ">queued<" in rows[1] and "0 of 2 tasks" in rows[1]
    assert 'href="/tasks/demo-adversarial/">demo-adversarial</a>' in rows[2] and ">succeeded<" in rows[2]

    polled = client.get("/", headers={"HX-Request": "true", "HX-Target": "demo-checks"}).content.decode()
    assert "<h1>Dashboard</h1>" not in polled  # only the section, cheap to poll
    assert polled.count('<tr class="demo-check">') == 3

    ValidationRun.objects.filter(pk=run.pk).update(status="succeeded", done=2)
    RewardCheck.objects.filter(pk=check.pk).update(status="failed")
    polled = client.get("/", headers={"HX-Request": "true", "HX-Target": "demo-checks"}).content.decode()
    assert '<div id="demo-checks"></div>' in polled and "every 3s" not in polled  # done: the polling stops
    assert "Checking the demo" not in client.get("/").content.decode()


def test_make_run_queues_the_demo_checks_after_loading_the_demo_without_waiting_for_them() -> None:
    run = (Path(__file__).resolve().parents[2] / "scripts" / "run.sh").read_text()
    load = re.search(r"^\$BIN/python manage\.py \w+_demo$", run, re.MULTILINE)  # the demo's loading line
    verify = re.search(r"^\{ \$BIN/python manage\.py verify_demo \\\n.*\}\s*&$", run, re.MULTILINE)
    assert load is not None and verify is not None
    assert load.start() < verify.start() < run.index("start_workers\n")
