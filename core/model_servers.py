"""Which model servers Crucible may call, and which of them get a key. Plain Python.

A model server's base URL comes from a researcher (the launch form, `rollout --base-url`,
`rewrite_statements --server`); keys come from the operator's environment. Without this check,
typing a URL was enough to receive the operator's OPENAI_API_KEY, or to make a worker request an
internal address on a researcher's say-so. The `openai` policy and the statement rewrite both
call `check_server` and `server_key`, so the operator's list means the same everywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from core.env import envlist, envstr

SERVERS_ENV = "CRUCIBLE_MODEL_SERVERS"
KEYS_ENV = "CRUCIBLE_MODEL_SERVER_KEYS"
# Loopback on any port: vLLM, SGLang, Ollama and `transformers serve` run beside the worker.
DEFAULT_SERVERS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
DEFAULT_KEY_ORIGIN = "https://api.openai.com"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class ServerNotAllowed(ValueError):
    """A model server URL that is malformed or that the operator did not list; the message says which."""


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int | None  # None in an allowlist entry: any port

    def admits(self, other: Origin) -> bool:
        return (self.scheme, self.host) == (other.scheme, other.host) and self.port in (None, other.port)


def shown(text: str, limit: int = 200) -> str:
    """Text from a command line, a form or a server, fit for one line of a message: bounded, printable."""
    return repr("".join(c if c.isprintable() else "?" for c in text.strip()[:limit]))


def parse_origin(url: str, *, wildcard_port: bool = False) -> Origin:
    """The scheme, host and port of an http(s) URL; a URL with credentials, a query or a fragment
    is refused (`http://127.0.0.1:8000@attacker/` must not pass as loopback)."""
    text = url.strip()
    any_port = wildcard_port and text.endswith(":*")
    if any_port:
        text = text[:-2]
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ServerNotAllowed(f"{shown(url)} is not a URL") from None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ServerNotAllowed(f"{shown(url)} is not an http:// or https:// URL")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise ServerNotAllowed(f"{shown(url)}: a model server URL takes no credentials, query or fragment")
    if any_port:
        return Origin(parts.scheme, parts.hostname, None)
    return Origin(parts.scheme, parts.hostname, port if port is not None else _DEFAULT_PORTS[parts.scheme])


def allowed_servers() -> list[Origin]:
    try:
        return [parse_origin(entry, wildcard_port=True) for entry in envlist(SERVERS_ENV, DEFAULT_SERVERS)]
    except ServerNotAllowed as exc:
        raise ServerNotAllowed(f"{SERVERS_ENV}: {exc}") from None


def check_server(base_url: str) -> Origin:
    """The server's origin, when the operator allows it; ServerNotAllowed naming the setting otherwise."""
    origin = parse_origin(base_url)
    if not any(entry.admits(origin) for entry in allowed_servers()):
        raise ServerNotAllowed(
            f"model server {shown(base_url)} is not allowed: the operator lists model servers in {SERVERS_ENV}"
        )
    return origin


def server_key(origin: Origin) -> str | None:
    """The bearer token for this server, or None: a key is sent only to the origin it is set for.

    CRUCIBLE_MODEL_SERVER_KEYS maps origins to the names of environment variables holding their
    keys (`https://vllm.internal:8000=VLLM_KEY,...`); by default OPENAI_API_KEY belongs to the
    origin of OPENAI_BASE_URL, or to https://api.openai.com when that is unset.
    """
    default = f"{envstr('OPENAI_BASE_URL', '') or DEFAULT_KEY_ORIGIN}=OPENAI_API_KEY"
    for entry in envlist(KEYS_ENV, [default]):
        where, sep, variable = entry.rpartition("=")
        if not sep or not where or not variable:
            raise ServerNotAllowed(f"{KEYS_ENV} entries are ORIGIN=ENV_VARIABLE, not {shown(entry)}")
        try:
            keyed = parse_origin(where)
        except ServerNotAllowed as exc:
            raise ServerNotAllowed(f"{KEYS_ENV}: {exc}") from None
        if keyed == origin:
            return os.environ.get(variable.strip()) or None
    return None
