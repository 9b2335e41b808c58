"""Who may call what: every API operation x anonymous / reviewer / researcher / admin.

The operations come from the OpenAPI schema the server serves, so a new endpoint without a
row here fails the test. Writes are sent with an empty body: a role that may write gets the
validation error (400) or the state conflict (409), never a launched batch or run; a role that
may not gets 403 before the body is read.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.urls import URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

from core.tokens import create_token
from tests.factories import UserFactory
from tests.webapp.api_world import World, build_world

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "reviewer", "researcher", "admin")
READ = (401, 200, 200, 200)  # reviewers read
RESEARCH_READ = (401, 403, 200, 200)  # the comparison-set pages are a researcher's too
WRITE_400 = (401, 403, 400, 400)  # researchers write; the empty body is refused
CONFLICT = (401, 403, 409, 409)  # researchers may, but the row's state says no
JUDGE_400 = (401, 400, 400, 400)  # reviewers judge
JUDGE_409 = (401, 409, 409, 409)  # ... a pair they do not hold

# (method, path as in the schema): statuses for (anonymous, reviewer, researcher, admin).
MATRIX: dict[tuple[str, str], tuple[int, int, int, int]] = {
    ("GET", "/api/v1/suites/"): READ,
    ("GET", "/api/v1/suites/{name}/"): READ,
    ("POST", "/api/v1/suites/{name}/split/"): WRITE_400,
    ("GET", "/api/v1/tasks/"): READ,
    ("GET", "/api/v1/tasks/{task_id}/"): READ,
    ("GET", "/api/v1/tasks/{task_id}/validation/"): READ,
    ("POST", "/api/v1/tasks/{task_id}/test-command/"): WRITE_400,
    ("GET", "/api/v1/trajectories/"): READ,
    ("GET", "/api/v1/trajectories/{trajectory_id}/"): READ,
    ("GET", "/api/v1/trajectories/{trajectory_id}/steps/"): READ,
    ("GET", "/api/v1/rewards/"): READ,
    ("GET", "/api/v1/rewards/score/"): READ,
    ("POST", "/api/v1/rewards/score/"): WRITE_400,
    ("GET", "/api/v1/rewards/score/{id}/"): READ,
    ("GET", "/api/v1/rewards/{id}/"): READ,
    ("GET", "/api/v1/batches/"): READ,
    ("POST", "/api/v1/batches/"): WRITE_400,
    ("GET", "/api/v1/batches/{id}/"): READ,
    ("POST", "/api/v1/batches/{id}/cancel/"): CONFLICT,  # the batch has finished
    ("POST", "/api/v1/batches/{id}/resume/"): (401, 403, 200, 200),  # nothing left to run: unchanged
    ("GET", "/api/v1/comparison-sets/"): RESEARCH_READ,
    ("POST", "/api/v1/comparison-sets/"): WRITE_400,
    ("GET", "/api/v1/comparison-sets/{name}/"): RESEARCH_READ,
    ("GET", "/api/v1/comparisons/"): RESEARCH_READ,
    ("GET", "/api/v1/comparisons/{id}/"): RESEARCH_READ,
    ("GET", "/api/v1/comparisons/next/"): (401, 400, 400, 400),  # no ?set=
    ("POST", "/api/v1/comparisons/{id}/judgements/"): JUDGE_400,
    ("POST", "/api/v1/comparisons/{id}/skip/"): JUDGE_409,
    ("GET", "/api/v1/judgements/"): RESEARCH_READ,
    ("GET", "/api/v1/judgements/{id}/"): RESEARCH_READ,
    ("GET", "/api/v1/preference-sets/"): RESEARCH_READ,
    ("GET", "/api/v1/preference-sets/{name}/"): RESEARCH_READ,
    ("GET", "/api/v1/preference-sets/{name}/pairs/"): RESEARCH_READ,
    ("GET", "/api/v1/training-sets/"): READ,
    ("POST", "/api/v1/training-sets/"): WRITE_400,
    ("GET", "/api/v1/training-sets/{id}/"): READ,
    ("GET", "/api/v1/training-runs/"): READ,
    ("POST", "/api/v1/training-runs/"): WRITE_400,
    ("GET", "/api/v1/training-runs/{id}/"): READ,
    ("POST", "/api/v1/training-runs/{id}/cancel/"): CONFLICT,  # the run has finished
    ("POST", "/api/v1/training-runs/{id}/resume/"): CONFLICT,  # it succeeded: nothing to resume
    ("GET", "/api/v1/training-runs/{id}/metrics/"): READ,
    ("GET", "/api/v1/checkpoints/"): READ,
    ("GET", "/api/v1/checkpoints/{id}/"): READ,
    ("GET", "/api/v1/eval-runs/"): READ,
    ("POST", "/api/v1/eval-runs/"): WRITE_400,
    ("GET", "/api/v1/eval-runs/{id}/"): READ,
    ("GET", "/api/v1/exports/{kind}/"): RESEARCH_READ,  # reviewers read pages, they take no data away
    ("POST", "/api/v1/exports/{kind}/"): WRITE_400,  # to the object store; no format given
    ("GET", "/api/v1/exports/stored/{kind}/{name}/"): (401, 403, 404, 404),  # no stored export of that name
    # Outside the schema: the router's index, the schema itself and its Swagger UI.
    ("GET", "/api/v1/"): READ,
    ("GET", "/api/schema/"): READ,
    ("GET", "/api/docs/"): READ,
}
NOT_IN_SCHEMA = {("GET", "/api/v1/"), ("GET", "/api/schema/"), ("GET", "/api/docs/")}


def schema_operations() -> set[tuple[str, str]]:
    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return {(method.upper(), path) for path, item in schema["paths"].items() for method in item}


def api_routes(patterns: list[Any] | None = None, prefix: str = "/") -> set[str]:
    """Every URL under /api/ the resolver knows, converters written as the schema writes them."""
    found: set[str] = set()
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(entry.pattern))
        if isinstance(entry, URLResolver):
            found |= api_routes(entry.url_patterns, route)
        elif route.startswith("/api/"):
            found.add(route.replace("{pk}", "{id}"))  # as the schema names it
    return found


def concrete(path: str, world: World) -> str:
    resource = "/".join(path.split("/")[3:5]) if path.startswith("/api/v1/rewards/score/") else path.split("/")[3]
    value = {
        "rewards/score": world.scoring_run.pk,
        "suites": world.suite.name,
        "tasks": world.task.task_id,
        "trajectories": world.good.trajectory_id,
        "rewards": world.reward.pk,
        "batches": world.batch.pk,
        "comparison-sets": world.comparison_set.name,
        "comparisons": world.comparison.pk,
        "judgements": world.judgement.pk,
        "preference-sets": world.comparison_set.name,
        "training-sets": world.training_set.pk,
        "training-runs": world.run.pk,
        "checkpoints": world.checkpoint.pk,
        "eval-runs": world.eval_run.pk,
        "exports": "trajectories",
    }.get(resource)
    for name in ("{name}", "{task_id}", "{trajectory_id}", "{id}", "{kind}"):
        path = path.replace(name, str(value))
    return path


def bearer(user: User | None) -> dict[str, str]:
    if user is None:
        return {}
    _, secret = create_token(user, "matrix")
    return {"Authorization": f"Bearer {secret}"}


def test_every_schema_operation_and_api_address_has_a_row_in_the_matrix() -> None:
    assert schema_operations() == set(MATRIX) - NOT_IN_SCHEMA
    # An address left out of the schema (extend_schema(exclude=True), a plain Django view) too.
    assert api_routes() == {path for _, path in MATRIX}


def test_every_endpoint_answers_each_role_as_the_matrix_says(
    admin_user: User, researcher: User, reviewer: User
) -> None:
    world = build_world(researcher)
    cache.clear()  # the throttles' counts from earlier tests in this process
    headers = [bearer(user) for user in (None, reviewer, researcher, admin_user)]
    got: dict[tuple[str, str], tuple[int, ...]] = {}
    for method, path in MATRIX:
        url = concrete(path, world)
        statuses = []
        for auth in headers:
            client = Client(headers=auth)
            if method == "GET":
                response = client.get(url)
            else:
                response = client.post(url, {}, content_type="application/json")
            statuses.append(response.status_code)
        got[(method, path)] = tuple(statuses)
    wrong = {key: (got[key], expected) for key, expected in MATRIX.items() if got[key] != expected}
    assert not wrong, "\n".join(f"{m} {p}: got {g}, expected {e}" for (m, p), (g, e) in wrong.items())


def test_a_signed_in_account_without_a_role_is_refused_everywhere() -> None:
    world = build_world()
    outsider = UserFactory.create(username="oscar-outsider")
    auth = bearer(outsider)
    cache.clear()
    for method, path in MATRIX:
        url = concrete(path, world)
        client = Client(headers=auth)
        response = client.get(url) if method == "GET" else client.post(url, {}, content_type="application/json")
        assert response.status_code == 403, (method, path, response.status_code)
