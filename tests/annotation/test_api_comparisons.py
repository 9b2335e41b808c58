from __future__ import annotations

import json

import pytest
from django.test import Client

from annotation.models import Assignment, Judgement
from tests.annotation.pairs_data import comparison_set, secret_pair
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def api_client(name: str = "rob", role: str | None = "reviewer") -> Client:
    client = Client()
    client.force_login(UserFactory.create(username=name, role=role))
    return client


def post_judgement(client: Client, pk: int, body: object) -> object:
    return client.post(f"/api/v1/comparisons/{pk}/judgements/", body, content_type="application/json")


def test_next_returns_a_blind_payload_and_locks_the_pair() -> None:
    _, secrets = secret_pair()
    client = api_client()
    response = client.get("/api/v1/comparisons/next/", {"set": "blind"})
    assert response.status_code == 200
    text = response.content.decode()
    for secret in secrets:
        assert secret not in text, f"the API payload reveals {secret!r}"
    body = response.json()
    assert set(body) == {"id", "set", "task_id", "statement", "left", "right", "expires_at"}
    assert set(body["left"]) == {"patch", "tests", "trajectory_url"}
    assert {t["passed"] for t in body["left"]["tests"] if t["list"] == "fail_to_pass"} <= {1, 3}
    assignment = Assignment.objects.get()
    assert assignment.comparison.locked_by == assignment.reviewer
    left_is_a = not assignment.swapped
    a_patch = assignment.comparison.trajectory_a.patch
    assert (body["left"]["patch"] == a_patch) == left_is_a
    assert client.get("/api/v1/comparisons/next/", {"set": "blind"}).json()["id"] == body["id"]


def test_a_judgement_in_payload_terms_is_stored_in_pair_terms() -> None:
    comparison_set(name="api", tasks=1)
    client = api_client()
    pk = client.get("/api/v1/comparisons/next/", {"set": "api"}).json()["id"]
    bad = post_judgement(client, pk, {"choice": "left", "reason": "x"})
    assert bad.status_code == 400 and "choice" in bad.json()["errors"]  # type: ignore[attr-defined]
    no_reason = post_judgement(client, pk, {"choice": "A", "reason": ""})
    assert no_reason.status_code == 400  # type: ignore[attr-defined]
    bad_tag = post_judgement(client, pk, {"choice": "A", "reason": "x", "tags": ["fast"]})
    assert bad_tag.status_code == 400  # type: ignore[attr-defined]
    assert not Judgement.objects.exists()
    ok = post_judgement(client, pk, {"choice": "A", "reason": "left handles empty input", "tags": ["correct"]})
    assert ok.status_code == 201  # type: ignore[attr-defined]
    assert ok.json() == {"id": Judgement.objects.get().pk, "comparison": pk, "choice": "A", "tags": ["correct"]}  # type: ignore[attr-defined]
    judgement = Judgement.objects.get()
    assert judgement.choice == ("B" if judgement.swapped else "A")
    again = post_judgement(client, pk, {"choice": "B", "reason": "changed my mind"})
    assert again.status_code == 409  # type: ignore[attr-defined]
    assert again.json()["detail"] == "you already judged this pair"  # type: ignore[attr-defined]
    done = client.get("/api/v1/comparisons/next/", {"set": "api"})
    assert done.status_code == 204 and done["X-Queue-Done"] == "api"


def test_only_the_holder_may_judge_or_skip_a_pair() -> None:
    comparison_set(name="api", tasks=2)
    ann = api_client("ann")
    pk = ann.get("/api/v1/comparisons/next/", {"set": "api"}).json()["id"]
    ben = api_client("ben")
    refused = post_judgement(ben, pk, {"choice": "A", "reason": "mine now"})
    assert refused.status_code == 409  # type: ignore[attr-defined]
    assert "not assigned to you" in json.dumps(refused.json())  # type: ignore[attr-defined]
    assert ben.post(f"/api/v1/comparisons/{pk}/skip/").status_code == 409
    assert ann.post(f"/api/v1/comparisons/{pk}/skip/").status_code == 204
    assert ann.get("/api/v1/comparisons/next/", {"set": "api"}).json()["id"] != pk


def test_next_answers_bad_requests_clearly() -> None:
    comparison_set(name="api", tasks=1)
    client = api_client()
    assert client.get("/api/v1/comparisons/next/").json()["errors"] == {"set": ["name the comparison set: ?set=NAME"]}
    missing = client.get("/api/v1/comparisons/next/", {"set": "nope"})
    assert missing.status_code == 404 and missing.json()["detail"] == "no comparison set named 'nope'"
    assert api_client("oscar", role=None).get("/api/v1/comparisons/next/", {"set": "api"}).status_code == 403
    assert Client().get("/api/v1/comparisons/next/", {"set": "api"}).status_code == 401
    assert not Assignment.objects.exists()
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/comparisons/next/" in schema.content


def test_a_pipeline_with_an_api_token_takes_and_judges_pairs_without_a_session() -> None:
    from rest_framework.authtoken.models import Token

    comparison_set(name="api", tasks=1)
    token = Token.objects.create(user=UserFactory.create(username="bot", role="reviewer"))
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Token {token.key}")
    pk = client.get("/api/v1/comparisons/next/", {"set": "api"}).json()["id"]
    answer = post_judgement(client, pk, {"choice": "tie", "reason": "equivalent fixes"})
    assert answer.status_code == 201  # type: ignore[attr-defined]
    assert Judgement.objects.get().reviewer.username == "bot"
