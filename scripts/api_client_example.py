#!/usr/bin/env python
"""A Python client for the Crucible API, generated from the server's OpenAPI schema.

    python scripts/api_client_example.py --base-url http://localhost:8000 --token crc_...
    python scripts/api_client_example.py --base-url ... --token ... --print-code > crucible_client.py

It reads /api/schema/, writes one typed function per operation (named by its operationId:
`suites_list`, `trajectories_steps_retrieve`, `batches_create`, ...), and with --print-code
prints that module instead of running the demo. The demo lists the suites, walks every
trajectory page by cursor, and reads the first trajectory's steps and rewards. Only httpx is
needed; the token comes from /profile/ (or CRUCIBLE_API_TOKEN).
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import re
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

TYPES = {"integer": "int", "number": "float", "boolean": "bool", "string": "str"}

HEADER = '''"""Generated from {title} {version} by scripts/api_client_example.py: do not edit."""

from __future__ import annotations

from typing import Any

import httpx


class ApiError(Exception):
    """A problem-details answer (RFC 9457): .problem holds type, title, status, detail, errors."""

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(f"{{problem.get('status')}} {{problem.get('title')}}: {{problem.get('detail')}}")
        self.problem = problem


def _call(client: httpx.Client, method: str, path: str, query: dict[str, Any], body: Any) -> Any:
    params = {{k: v for k, v in query.items() if v is not None}}
    response = client.request(method, path, params=params, json=body)
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = {{"status": response.status_code, "title": response.reason_phrase, "detail": response.text[:200]}}
        raise ApiError(problem)
    return response.json() if response.content else None
'''


def identifier(name: str) -> str:
    name = re.sub(r"\W", "_", name)
    return f"{name}_" if keyword.iskeyword(name) or name[:1].isdigit() else name


def function(path: str, method: str, operation: dict[str, Any]) -> str:
    params = [p for p in operation.get("parameters", []) if p["in"] in ("path", "query")]
    args, path_args, query = [], [], []
    for p in sorted(params, key=lambda p: p["in"] != "path"):
        kind = TYPES.get(p.get("schema", {}).get("type", ""), "Any")
        name = identifier(p["name"])
        if p["in"] == "path":
            args.append(f"{name}: {kind}")
            path_args.append((p["name"], name))
        else:
            args.append(f"{name}: {kind} | None = None")
            query.append(f"{p['name']!r}: {name}")
    has_body = "requestBody" in operation
    if has_body:
        args.append("body: dict[str, Any] | None = None")
    url = path
    for raw, name in path_args:
        url = url.replace("{" + raw + "}", "{" + name + "}")
    summary = (operation.get("description") or operation.get("summary") or "").strip().split("\n")[0]
    signature = ", ".join(["client: httpx.Client", *(["*"] if args else []), *args])
    return (
        f"\n\ndef {identifier(operation['operationId'].removeprefix('v1_'))}({signature}) -> Any:\n"
        f'    """{method.upper()} {path}{": " + summary.replace(chr(34) * 3, "") if summary else ""}"""\n'
        f"    return _call(client, {method.upper()!r}, f{url!r}, {{{', '.join(query)}}}, "
        f"{'body' if has_body else 'None'})\n"
    )


def generate(schema: dict[str, Any]) -> str:
    info = schema.get("info", {})
    code = HEADER.format(title=info.get("title", "API"), version=info.get("version", ""))
    for path, item in sorted(schema["paths"].items()):
        for method, operation in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                code += function(path, method, operation)
    return code


def load_client(base_url: str, token: str) -> tuple[httpx.Client, dict[str, Any], str]:
    client = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    response = client.get("/api/schema/", params={"format": "json"})
    response.raise_for_status()
    code = generate(response.json())
    namespace: dict[str, Any] = {}
    exec(compile(code, "crucible_client", "exec"), namespace)  # noqa: S102 - our own generated module
    return client, namespace, code


def cursor_of(next_url: str | None) -> str | None:
    return parse_qs(urlsplit(next_url).query).get("cursor", [None])[0] if next_url else None


def demo(client: httpx.Client, api: dict[str, Any]) -> dict[str, Any]:
    suites = api["suites_list"](client)["results"]
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = api["trajectories_list"](client, page_size=50, cursor=cursor)
        seen += page["results"]
        cursor = cursor_of(page["next"])
        if cursor is None:
            break
    report: dict[str, Any] = {"suites": [s["name"] for s in suites], "trajectories": len(seen)}
    if seen:
        first = seen[0]["trajectory_id"]
        steps = api["trajectories_steps_retrieve"](client, trajectory_id=first, after=0)
        rewards = api["rewards_list"](client, trajectory=first)["results"]
        report |= {"first": first, "steps": len(steps["steps"]), "rewards": [r["spec_version"] for r in rewards]}
    try:
        api["batches_retrieve"](client, id=0)
    except api["ApiError"] as exc:
        report["missing_batch"] = exc.problem["type"]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default=os.environ.get("CRUCIBLE_URL", "http://localhost:8000"))
    parser.add_argument("--token", default=os.environ.get("CRUCIBLE_API_TOKEN", ""))
    parser.add_argument("--print-code", action="store_true", help="print the generated client module and stop")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("give --token (make one on /profile/) or set CRUCIBLE_API_TOKEN")
    client, api, code = load_client(args.base_url, args.token)
    try:
        if args.print_code:
            sys.stdout.write(code)
        else:
            print(json.dumps(demo(client, api), indent=2))
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
