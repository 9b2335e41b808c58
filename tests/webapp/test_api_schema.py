"""The OpenAPI schema validates without warnings, documents every operation with examples and
the problem responses, serves Swagger UI without the network, and the generated Python client
in scripts/ works against a live server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator

from core.tokens import create_token
from tests.conftest import REPO, client_for
from tests.webapp.api_world import build_world

SCRIPT = REPO / "scripts" / "api_client_example.py"


def test_the_schema_validates_with_no_warning(tmp_path: Any) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out), stderr=StringIO())
    assert "/api/v1/batches/{id}/cancel/" in out.read_text()


def test_every_operation_has_an_example_and_says_how_it_fails() -> None:
    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    missing = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            ok = next(code for code in responses if code.startswith("2"))
            examples = dict(responses[ok].get("content", {}).get("application/json", {}).get("examples", {}))
            examples |= (
                operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("examples", {})
            )
            if not examples and not path.startswith("/api/v1/exports/") and ok != "204":
                missing.append(f"{method} {path}")
            for code in ("401", "403", "429"):
                assert "application/problem+json" in responses[code]["content"], (method, path, code)
            if "{" in path:
                assert "404" in responses, (method, path)
    assert not missing, missing
    assert set(components["Problem"]["required"]) == {"type", "title", "status", "detail", "instance"}
    assert schema["components"]["securitySchemes"]["apiToken"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["apiToken"]["description"],
    }


@pytest.mark.django_db
def test_swagger_ui_is_served_from_this_server_only(reviewer: User) -> None:
    client = client_for(reviewer)
    page = client.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert "cdn.jsdelivr" not in page and "unpkg.com" not in page
    # No inline script: the content security policy (script-src 'self') would block it.
    scripts = re.findall(r"<script([^>]*)>", page)
    assert scripts and all("src=" in attributes for attributes in scripts)
    init = client.get("/api/docs/?script=")
    assert init["Content-Type"].startswith("application/javascript") and "/api/schema/" in init.content.decode()
    # The files come with the pinned sidecar package and are collected with the site's own static files.
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css")


@pytest.mark.django_db(transaction=True)
def test_the_generated_client_walks_the_api_of_a_live_server(live_server: Any, reviewer: User) -> None:
    world = build_world()
    _, secret = create_token(reviewer, "client example")
    base = ["--base-url", live_server.url, "--token", secret]
    run = subprocess.run([sys.executable, str(SCRIPT), *base], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["suites"] == ["world"] and report["trajectories"] == 2
    assert report["first"] in {str(world.good.trajectory_id), str(world.bad.trajectory_id)}
    assert report["rewards"] == ["default@test"]
    assert report["missing_batch"] == "urn:crucible:problem:not-found"

    code = subprocess.run(
        [sys.executable, str(SCRIPT), *base, "--print-code"], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    compile(code, "crucible_client.py", "exec")
    assert "def batches_create(client: httpx.Client, *, body: dict[str, Any] | None = None) -> Any:" in code
    assert "def trajectories_list(client: httpx.Client, *, " in code
    refused = subprocess.run(
        [sys.executable, str(SCRIPT), "--base-url", live_server.url, "--token", "crc_revoked"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode != 0 and "401" in refused.stderr
