"""Every API error is an RFC 9457 problem (application/problem+json), throttling included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client, RequestFactory, override_settings
from django.urls import get_resolver

from tests.conftest import client_for
from tests.webapp.api_world import build_world

pytestmark = pytest.mark.django_db

PROBLEM_KEYS = {"type", "title", "status", "detail", "instance"}


def problem(response: Any, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == "application/problem+json"
    body: dict[str, Any] = json.loads(response.content)
    assert PROBLEM_KEYS <= set(body) and body["status"] == status
    assert body["type"] == f"urn:crucible:problem:{kind}"
    assert body["detail"] and body["title"]
    return body


def test_a_bad_launch_names_each_bad_field_and_launches_nothing(researcher: User) -> None:
    world = build_world(researcher)
    before = world.suite.batches.count()
    response = client_for(researcher).post(
        "/api/v1/batches/", {"suite": "no-such-suite", "policy": "hf", "samples": 999}, content_type="application/json"
    )
    body = problem(response, 400, "validation")
    assert body["instance"] == "/api/v1/batches/"
    assert set(body["errors"]) == {"suite", "samples"} and all(body["errors"].values())
    assert body["title"] == "Bad Request" and "2 fields" in body["detail"]
    assert world.suite.batches.count() == before


def test_nested_field_errors_are_flattened_with_dots(researcher: User) -> None:
    world = build_world(researcher)
    response = client_for(researcher).post(
        f"/api/v1/comparisons/{world.comparison.pk}/judgements/",
        {"choice": "nope", "tags": ["bogus"]},
        content_type="application/json",
    )
    body = problem(response, 400, "validation")
    assert {"choice", "reason", "tags.0"} <= set(body["errors"])


def test_broken_json_is_a_parse_problem(researcher: User) -> None:
    response = client_for(researcher).post("/api/v1/batches/", "{not json", content_type="application/json")
    problem(response, 400, "parse-error")


def test_who_you_are_and_what_you_may_do_are_problems_too(reviewer: User) -> None:
    anonymous = Client().get("/api/v1/batches/")
    problem(anonymous, 401, "not-authenticated")
    assert anonymous["WWW-Authenticate"] == 'Bearer realm="api"'
    problem(Client().get("/api/v1/batches/", HTTP_AUTHORIZATION="Bearer crc_wrong"), 401, "authentication-failed")
    refused = problem(client_for(reviewer).post("/api/v1/batches/", {}), 403, "permission-denied")
    assert "researcher" in refused["detail"]
    problem(client_for(reviewer).delete("/api/v1/suites/world/"), 403, "permission-denied")


def test_missing_objects_unknown_addresses_and_wrong_methods(researcher: User) -> None:
    client = client_for(researcher)
    assert problem(client.get("/api/v1/batches/999999/"), 404, "not-found")["instance"] == "/api/v1/batches/999999/"
    # No URL pattern at all: Django's 404, answered in the API's shape under /api/ only.
    problem(client.get("/api/v1/no-such-thing/"), 404, "not-found")
    problem(client.get("/api/v1/batches/not-a-number/"), 404, "not-found")
    problem(client.get("/api/v1/comparisons/next/", {"set": "a\x00b"}), 404, "not-found")  # PostgreSQL refuses NUL
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and "problem" not in page["Content-Type"]
    problem(client.delete("/api/v1/suites/world/"), 405, "method-not-allowed")


def test_a_state_conflict_is_a_409_problem(researcher: User) -> None:
    world = build_world(researcher)
    body = problem(client_for(researcher).post(f"/api/v1/batches/{world.batch.pk}/cancel/"), 409, "batch-conflict")
    assert "already ended" in body["detail"]


def test_a_server_error_under_the_api_is_a_problem_and_elsewhere_a_page() -> None:
    handler500 = get_resolver().resolve_error_handler(500)
    api = handler500(RequestFactory().get("/api/v1/suites/"))
    body = problem(api, 500, "server-error")
    assert "Traceback" not in body["detail"]
    page = handler500(RequestFactory().get("/trajectories/"))
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")


def rates(**scopes: str | None) -> dict[str, Any]:
    return {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": None, "user": None, "launch": None, **scopes}}


def test_too_many_requests_get_a_429_problem_with_retry_after(reviewer: User) -> None:
    cache.clear()
    client = client_for(reviewer)
    with override_settings(REST_FRAMEWORK=rates(user="3/min")):
        assert [client.get("/api/v1/suites/").status_code for _ in range(3)] == [200, 200, 200]
        refused = client.get("/api/v1/suites/")
    body = problem(refused, 429, "throttled")
    assert 0 < int(refused["Retry-After"]) <= 60 and "throttled" in body["detail"]


def test_launches_have_their_own_tighter_rate_and_reads_do_not_count(researcher: User) -> None:
    cache.clear()
    client = client_for(researcher)
    with override_settings(REST_FRAMEWORK=rates(launch="2/hour")):
        for _ in range(5):
            assert client.get("/api/v1/batches/").status_code == 200
        assert [client.post("/api/v1/batches/", {}).status_code for _ in range(2)] == [400, 400]
        problem(client.post("/api/v1/batches/", {}), 429, "throttled")
        assert client.get("/api/v1/batches/").status_code == 200


def test_the_rates_come_from_the_environment() -> None:
    rates: dict[str, str] = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]  # type: ignore[assignment]
    assert set(rates) == {"anon", "user", "launch"} and all(rates.values())
    source = (settings.BASE_DIR / "webapp" / "settings.py").read_text()
    for name in ("CRUCIBLE_API_RATE_ANON", "CRUCIBLE_API_RATE_USER", "CRUCIBLE_API_RATE_LAUNCH"):
        assert name in source
