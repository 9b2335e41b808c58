"""Evaluation pages and API: results, isolation report, comparison with a paired test."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from core.vocabulary import ActionType, PolicyKind
from evaluation.models import EvalRun
from tests.conftest import client_for
from tests.evaluation.helpers import finished_eval, small_suite
from trajectories.policies.base import Message, Policy, PolicyOutput, ToolCall
from trajectories.policies.registry import policy_registry


class GivesUp(Policy):
    kind = PolicyKind.SCRIPTED

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": "gives-up", "checkpoint": "", "temperature": 0.0, "top_p": 1.0, "seed": 0}

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        return PolicyOutput("Nothing to do.", ToolCall(ActionType.SUBMIT, {}))


@pytest.mark.django_db
def test_the_pages_show_results_isolation_and_a_paired_comparison(
    researcher: User, reviewer: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = small_suite("two-tasks", ("task_0001", "task_0008"))
    oracle = finished_eval(suite)
    with monkeypatch.context() as patched:
        patched.setitem(policy_registry._factories, PolicyKind.SCRIPTED, lambda s: GivesUp())
        idle = finished_eval(suite, model="gives-up")
    assert oracle.results["pass_at_k"] == {"1": 1.0} and idle.results["pass_at_k"] == {"1": 0.0}

    client = client_for(reviewer)
    listing = client.get(reverse("evaluation:list")).content.decode()
    assert f'href="/evaluation/{oracle.pk}/"' in listing and "pass@1 1.000" in listing
    assert 'id="launch-eval"' not in listing  # reviewers read; researchers launch

    page = client.get(reverse("evaluation:detail", args=[oracle.pk])).content.decode()
    assert 'data-k="1"' in page and "0.342 – 1.000" in page  # Wilson over two tasks, both solved
    assert "clean" in page and "task_id, same_function, similar_statement, same_commit" in page
    first = oracle.batch.trajectories.order_by("task_ref").first()  # type: ignore[union-attr]
    assert f"/trajectories/{first.trajectory_id}/" in page  # type: ignore[union-attr]

    compared = client.get(reverse("evaluation:compare"), {"a": oracle.pk, "b": idle.pk}).content.decode()
    assert 'id="wins">2<' in compared and 'id="losses">0<' in compared
    assert 'id="p-value">0.5000<' in compared and "no significant difference" in compared
    assert compared.count('class="win"') == 2
    assert client.get(reverse("evaluation:compare"), {"a": "x"}).status_code == 400


@pytest.mark.django_db
def test_the_api_lists_reads_and_lets_researchers_launch(researcher: User, reviewer: User) -> None:
    suite = small_suite()
    client = client_for(researcher)
    url = "/api/v1/eval-runs/"
    created = client.post(
        url, {"suite": suite.name, "policy": "scripted", "k": "1,2", "samples": 2}, content_type="application/json"
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["k_values"] == [1, 2] and body["samples"] == 2 and body["status"] == "running"
    assert body["isolation"]["clean"] is True and body["batch"] is not None
    bad = client.post(
        url, {"suite": suite.name, "policy": "scripted", "k": "1,5", "samples": 2}, content_type="application/json"
    )
    assert bad.status_code == 400 and "at least the largest k" in bad.content.decode()
    assert (
        client.post(url, {"suite": "nope", "policy": "scripted", "k": "1"}, content_type="application/json").status_code
        == 400
    )
    denied = client_for(reviewer).post(
        url, {"suite": suite.name, "policy": "scripted", "k": "1"}, content_type="application/json"
    )
    assert denied.status_code == 403 and EvalRun.objects.count() == 1
    assert client_for(reviewer).get(url).json()["results"][0]["id"] == body["id"]
    assert client_for(reviewer).get(f"{url}{body['id']}/").json()["status"] == "running"

    hostile = client.post(
        url,
        {"suite": suite.name, "policy": "scripted", "k": "1", "model": "<script>alert(1)</script>"},
        content_type="application/json",
    ).json()
    for page in (reverse("evaluation:detail", args=[hostile["id"]]), reverse("evaluation:list")):
        html = client.get(page).content.decode()
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    EvalRun.objects.filter(pk=hostile["id"]).delete()

    launched = client.post(
        reverse("evaluation:list"), {"suite": suite.name, "policy": "scripted", "k": "1", "temperature": "0.8"}
    )
    assert launched.status_code == 302 and EvalRun.objects.count() == 2
    refused = client.post(
        reverse("evaluation:list"),
        {"suite": suite.name, "policy": "scripted", "k": "3", "samples": "1", "temperature": "0.8"},
    )
    assert refused.status_code == 400 and "at least the largest k" in refused.content.decode()
