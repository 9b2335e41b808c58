"""Typed settings readers fail loudly; the vocabulary is the one source of choices."""

from __future__ import annotations

import subprocess
import sys
from enum import StrEnum
from pathlib import Path

import pytest
from django.db import models

from core.env import ImproperlyConfiguredEnv, envbool, envchoice, envint
from core.live import GROUP_RE, group_name
from core.vocabulary import ActionType, LiveGroup, RunStatus, choices, values
from tasks.models import ValidationRun
from trajectories.models import RolloutBatch, Trajectory

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize(
    ("reader", "raw"),
    [(envbool, "maybe"), (envint, "12x"), (lambda n, d: envchoice(n, d, ("a", "b")), "c")],
)
def test_a_bad_value_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch, reader: object, raw: str) -> None:
    monkeypatch.setenv("CRUCIBLE_TEST_SETTING", raw)
    with pytest.raises(ImproperlyConfiguredEnv, match="CRUCIBLE_TEST_SETTING"):
        reader("CRUCIBLE_TEST_SETTING", "a")  # type: ignore[operator]


def test_a_typo_in_the_sandbox_backend_stops_the_start() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "CRUCIBLE_SANDBOX_BACKEND": "bwarp",
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
            "CRUCIBLE_VAR_DIR": str(ROOT / "var"),
        },
    )
    assert result.returncode != 0
    assert "CRUCIBLE_SANDBOX_BACKEND='bwarp' is not one of bwrap, docker, local" in result.stderr


def test_choices_match_what_djangos_text_choices_would_give() -> None:
    class Old(models.TextChoices):
        QUEUED = "queued"
        RUN_TESTS = "run_tests"

    class New(StrEnum):
        QUEUED = "queued"
        RUN_TESTS = "run_tests"

    assert choices(New) == Old.choices  # so swapping them needs no migration


def test_model_fields_take_their_choices_from_the_vocabulary() -> None:
    assert Trajectory._meta.get_field("status").choices == choices(Trajectory.Status)
    assert RolloutBatch._meta.get_field("status").choices == choices(RunStatus)
    # One state machine for long work: a validation run can be cancelled like a batch.
    assert ValidationRun._meta.get_field("status").choices == choices(RunStatus)
    assert "invalid" in values(ActionType)


def test_live_group_names_are_built_and_checked_from_one_list() -> None:
    for kind in LiveGroup:
        assert GROUP_RE.match(group_name(kind, 42))
    assert not GROUP_RE.match("nothing-1")  # a kind no one publishes to
    assert not GROUP_RE.match("batch-1 extra")
