"""The demo verified on its first start: a validation run and a reward check of each demo suite, queued once.

`make run` calls `start_demo_checks` (manage.py verify_demo) after loading the demo; the jobs run on
the workers it starts, and the dashboard shows `demo_check_rows` until every one of them is done.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from core import states
from rewards.models import RewardCheck
from rewards.reward_checks import RewardCheckError, start_reward_check
from tasks.models import TaskSuite, ValidationRun
from tasks.services import start_validation_run

DEMO_SUITE, ADVERSARIAL_SUITE = "demo", "demo-adversarial"  # the suites seed_demo loads from demo/
GO_SUITE, JS_SUITE = "demo-go", "demo-js"  # demo/go_tasks and demo/js_tasks (docs/languages.md)
DEMO_SUITES = (DEMO_SUITE, ADVERSARIAL_SUITE, GO_SUITE, JS_SUITE)
# The reward check's stubbed patches are Python's: the Go and JavaScript suites are validated only.
REWARD_CHECKED_SUITES = (DEMO_SUITE, ADVERSARIAL_SUITE)
# Fewer than the button's 5: enough to catch a flaky demo test, sooner done on a fresh machine.
DEMO_VALIDATION_RUNS = 3
# A Go or Vitest run builds its test binary or starts Vite anew (about 1 s against pytest's 0.2 s):
# one run each keeps the first start's checks about as long as the Python suites alone make them.
LANGUAGE_VALIDATION_RUNS = 1


@dataclass(frozen=True)
class DemoChecksQueued:
    validations: list[str]  # the suites whose validation was queued now
    reward_checks: list[str]  # the suites whose reward check was queued now
    skipped: list[str]  # why a check could not be queued (a suite with no expected patch, no reward spec)


@dataclass(frozen=True)
class DemoCheckRow:
    suite: str
    kind: str  # "validation" or "reward check"
    status: str
    done: int
    total: int


def start_demo_checks() -> DemoChecksQueued:
    """Queue, for each demo suite that has none yet, a validation run and a reward check.

    Idempotent: a suite with a validation run (or a reward check) of any state gets no new one,
    so each `make run` after the first queues nothing. The suite rows are locked while deciding,
    so two starts at once cannot both queue.
    """
    validations: list[str] = []
    reward_checks: list[str] = []
    skipped: list[str] = []
    with transaction.atomic():
        for suite in TaskSuite.objects.select_for_update().filter(name__in=DEMO_SUITES).order_by("name"):
            if not ValidationRun.objects.filter(suite=suite).exists():
                language = suite.name in (GO_SUITE, JS_SUITE)
                start_validation_run(suite, LANGUAGE_VALIDATION_RUNS if language else DEMO_VALIDATION_RUNS)
                validations.append(suite.name)
            if suite.name in REWARD_CHECKED_SUITES and not RewardCheck.objects.filter(suite=suite).exists():
                try:
                    start_reward_check(suite)
                except RewardCheckError as exc:
                    skipped.append(f"{suite.name}: {exc}")
                else:
                    reward_checks.append(suite.name)
    return DemoChecksQueued(validations, reward_checks, skipped)


def demo_check_rows() -> list[DemoCheckRow]:
    """The latest validation run and reward check of each demo suite; empty once all of them are done."""
    rows: list[DemoCheckRow] = []
    for name in DEMO_SUITES:
        run = ValidationRun.objects.filter(suite__name=name).first()
        if run is not None:
            rows.append(DemoCheckRow(name, "validation", run.status, run.done, run.total))
        check = RewardCheck.objects.filter(suite__name=name).first()
        if check is not None:
            rows.append(DemoCheckRow(name, "reward check", check.status, check.done, check.total))
    if all(row.status in states.DONE for row in rows):
        return []
    return rows
