"""API tokens from the profile page: made, shown once, stored hashed, used, revoked."""

from __future__ import annotations

import hashlib
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core.models import ApiToken
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

SUITES = "/api/v1/suites/"


def make_token(client: Client, name: str = "nightly export") -> str:
    response = client.post("/profile/", {"name": name})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    found = re.search(r'<code id="new-token-value">([^<]+)</code>', response.content.decode())
    assert found, "the new token is on the page that made it"
    return found.group(1)


def test_a_token_is_made_shown_once_used_as_bearer_and_revoked(reviewer: User) -> None:
    client = client_for(reviewer)
    secret = make_token(client)

    row = ApiToken.objects.get(user=reviewer)
    assert row.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in {row.token_hash, row.prefix, row.name} and secret.startswith(row.prefix)
    page = client.get("/profile/").content.decode()
    assert secret not in page and row.prefix in page and "nightly export" in page  # shown once only

    api = Client()
    assert api.get(SUITES).status_code == 401
    assert api.get(SUITES, HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200
    assert api.get(SUITES, HTTP_AUTHORIZATION=f"Token {secret}").status_code == 200
    row.refresh_from_db()
    assert row.last_used_at is not None

    assert client.post(f"/profile/tokens/{row.pk}/revoke/").status_code == 302
    row.refresh_from_db()
    assert row.revoked_at is not None
    refused = api.get(SUITES, HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
    assert "revoked" in client.get("/profile/").content.decode()


def test_wrong_tokens_and_other_peoples_tokens_get_nowhere(reviewer: User, researcher: User) -> None:
    secret = make_token(client_for(reviewer))
    api = Client()
    assert api.get(SUITES, HTTP_AUTHORIZATION="Bearer crc_not-a-real-token").status_code == 401
    assert api.get(SUITES, HTTP_AUTHORIZATION="Bearer not-even-ours").status_code == 401
    assert api.get(SUITES, HTTP_AUTHORIZATION=f"Bearer {secret} extra").status_code == 401
    # Someone else cannot revoke my token.
    token = ApiToken.objects.get(user=reviewer)
    assert client_for(researcher).post(f"/profile/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    # A deactivated account's tokens stop working with it.
    User.objects.filter(pk=reviewer.pk).update(is_active=False)
    assert api.get(SUITES, HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 401


def test_a_token_needs_a_name_and_nothing_is_written_without_one(reviewer: User) -> None:
    response = client_for(reviewer).post("/profile/", {"name": "   "})
    assert response.status_code == 400 and "Give the token a name" in response.content.decode()
    assert not ApiToken.objects.exists()
    assert Client().get("/profile/").status_code == 302  # signed-in people only


def test_the_readme_says_how_to_get_and_use_a_token() -> None:
    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text()
    section = readme.split("## API tokens", 1)[1].split("\n## ", 1)[0]
    assert "/profile/" in section and "Authorization: Bearer" in section and "revoke" in section.lower()


def test_admins_see_who_holds_which_token_but_never_its_hash(reviewer: User, admin_user: User) -> None:
    make_token(client_for(reviewer))
    token = ApiToken.objects.get()
    User.objects.filter(pk=admin_user.pk).update(is_staff=True, is_superuser=True)
    html = client_for(admin_user).get(f"/admin/core/apitoken/{token.pk}/change/").content.decode()
    assert token.prefix in html and token.token_hash not in html
