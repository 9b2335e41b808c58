"""schemathesis against the served OpenAPI schema: no operation answers with a server error.

Every operation of the schema gets a bounded number of generated requests (the schema's own
examples first), sent as an admin with an API token through the WSGI application, in the
test's database with one row of each kind to find. Examples are derandomized so a run in CI
is the run a developer repeats.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import schemathesis
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from django.test import override_settings
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings

from core.tokens import create_token
from tests.webapp.api_world import build_world

pytestmark = pytest.mark.django_db

MAX_EXAMPLES = 5
# Generous rates: the throttles have their own test; here they would only hide operations.
NO_THROTTLE = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": None, "user": None, "launch": None}}


@contextmanager
def connection_kept() -> Iterator[None]:
    """The WSGI handler closes the database connection after each request, as a server should;
    here that connection holds the test's transaction (Django's test client does the same)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@override_settings(REST_FRAMEWORK=NO_THROTTLE)
def test_no_operation_answers_with_a_server_error(admin_user: User) -> None:
    build_world()
    cache.clear()
    _, secret = create_token(admin_user, "schemathesis")
    auth = {"Authorization": f"Bearer {secret}"}
    schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
    schema.app = WSGIHandler()
    errors: list[str] = []
    operations = 0

    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # an invalid schema fails here, loudly
        operations += 1

        @hypothesis_settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def call(case: Any) -> None:
            # A database error aborts the transaction: undo to here so the next request is judged alone.
            savepoint = transaction.savepoint()
            response = case.call(headers=auth)
            if response.status_code >= 500:
                transaction.savepoint_rollback(savepoint)
                errors.append(f"{case.method} {case.formatted_path} {case.query} {case.body!r}: {response.status_code}")
            else:
                transaction.savepoint_commit(savepoint)

        with connection_kept():
            call()

    assert operations >= 40, "the schema lost operations"
    assert not errors, "\n".join(errors[:20])
