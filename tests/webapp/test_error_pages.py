"""Every refused request on an HTML page answers inside the site's layout, with one message in UTF-8."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils.html import escape

from annotation.models import Comparison
from tests.annotation.agreement_fixtures import Pair, day, make_set
from tests.conftest import client_for
from tests.factories import SuiteFactory
from training.models import TrainingRun

pytestmark = pytest.mark.django_db

CURLY_NAME = "my “set”"


@dataclass(frozen=True)
class Case:
    """A request a page refuses: who sends it, what comes back, and the one message shown."""

    role: str
    send: Callable[[Client], object]
    status: int
    message: str


def _disagreement(client: Client) -> object:
    cset = make_set("split", [Pair({"ann": "A", "ben": "B"}, when=day(1))])
    pk = Comparison.objects.get(comparison_set=cset).pk
    return client.post(f"/annotation/sets/split/disagreements/{pk}/", {"choice": "A", "note": "n"})


def _cancel_finished_run(client: Client) -> object:
    run = TrainingRun.objects.create(kind="sft", status="succeeded")
    return client.post(f"/training/{run.pk}/cancel/", follow=True)


def _checkpoints_without_sides(client: Client) -> object:
    SuiteFactory.create(name="s1")
    form = {"name": "cp", "suite": "s1", "strategy": "checkpoints", "max_pairs": 5, "reviewers": 1, "per_task": 5}
    return client.post("/annotation/sets/new/", {**form, "seed": 0, "lock_minutes": 10})


CASES = {
    "freeze a training set with a bad name": Case(
        "researcher",
        lambda c: c.post("/training/sets/new/", {"name": CURLY_NAME, "query": "success=true"}),
        400,
        "Use only letters, digits, - and _ in the name.",
    ),
    "cancel a finished training run": Case("researcher", _cancel_finished_run, 200, "is already succeeded"),
    "launch an evaluation without the role": Case(
        "reviewer",
        lambda c: c.post("/evaluation/", {"suite": "x"}),
        403,
        "Launching an evaluation needs the researcher role.",
    ),
    "compare evaluations without ids": Case(
        "reviewer",
        lambda c: c.get("/evaluation/compare/?a=x"),
        400,
        "Choose two evaluation runs to compare (?a=ID&b=ID).",
    ),
    "resolve a pair without the role": Case(
        "reviewer", _disagreement, 403, "Resolving a pair needs the researcher role."
    ),
    "save a filter without a name": Case(
        "reviewer",
        lambda c: c.post("/trajectories/filters/", {"name": " ", "query": "success=true"}, follow=True),
        200,
        "Name the filter to save it.",
    ),
    "compare trajectories without a first one": Case(
        "reviewer",
        lambda c: c.get("/trajectories/compare/"),
        400,
        "Say which trajectory to start from: /trajectories/compare/?a=ID&b=ID",
    ),
    "draw checkpoint pairs without sides": Case(
        "researcher", _checkpoints_without_sides, 400, "the checkpoints strategy needs both sides, A and B"
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_refused_request_answers_in_the_layout_with_one_message(case: Case, researcher: User, reviewer: User) -> None:
    response = case.send(client_for(researcher if case.role == "researcher" else reviewer))
    assert response.status_code == case.status  # type: ignore[attr-defined]
    assert response["Content-Type"] == "text/html; charset=utf-8"  # type: ignore[index]
    html = response.content.decode("utf-8")  # type: ignore[attr-defined]
    assert '<header class="topbar">' in html and "<nav>" in html
    assert html.count(escape(case.message)) == 1, html
    assert "â€" not in html and "--" not in html.split("<main>", 1)[1]


def test_a_refused_training_set_keeps_the_typed_name_and_the_filter(researcher: User) -> None:
    response = client_for(researcher).post(
        "/training/sets/new/", {"name": CURLY_NAME, "query": "success=true", "size": "3"}
    )
    html = response.content.decode("utf-8")
    assert f'value="{CURLY_NAME}"' in html  # the curly quotes survive as typed
    assert 'value="3"' in html
    assert 'name="query" value="success=true"' in html
    assert 'aria-invalid="true"' in html


def test_the_api_keys_a_refused_comparison_set_by_its_parameter(researcher: User) -> None:
    SuiteFactory.create(name="s1")
    body = {"name": "cp", "suite": "s1", "strategy": "random", "side_a": "batch:1"}
    response = client_for(researcher).post("/api/v1/comparison-sets/", body, content_type="application/json")
    assert response.status_code == 400
    problem = response.json()
    assert problem["errors"] == {"side_a": ["sides A and B belong to the checkpoints strategy"]}
    assert problem["detail"].startswith("side_a: ")


def test_an_empty_training_config_is_one_message_beside_its_name(researcher: User) -> None:
    response = client_for(researcher).post("/training/", {"config": ""})
    html = response.content.decode("utf-8")
    assert response.status_code == 400 and response["Content-Type"] == "text/html; charset=utf-8"
    assert "<code>config</code>: This field is required.</li>" in html and "* config" not in html
