"""Any OpenAI-compatible chat-completions server as the policy (vLLM, SGLang, Ollama, transformers serve).

The server's own tool-call parser is preferred (`message.tool_calls`); servers that have none for
the model (transformers serve with a small model, most often) return the `<tool_call>` text as
content, which is parsed here the same way the local policy parses it.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx

from core import model_servers
from core.model_servers import Origin, ServerNotAllowed
from trajectories.policies.base import Message, Policy, PolicyError, PolicyOutput
from trajectories.policies.chat import (
    FORMAT_HINT,
    call_from_object,
    derive_seed,
    parse_tool_call,
    to_openai_messages,
)
from trajectories.policies.sampled import REQUEST_FIELDS, read_sampled

_SERVED_IDS_SHOWN = 10
# Servers that answered a request asking for sampled tokens with 400/422 and the same request
# without them with success (transformers serve refuses unknown fields): asked without from then on.
_REFUSE_TOKEN_FIELDS: set[str] = set()
_REFUSED = (400, 422)
_SERVED_ID = re.compile(r"[A-Za-z0-9._:/@+-]{1,80}")


def check_server(base_url: str) -> Origin:
    """The server's origin when the operator lists it (core.model_servers); PolicyError otherwise."""
    if not base_url.strip():
        raise PolicyError("the openai policy needs the server's base URL")
    try:
        return model_servers.check_server(base_url)
    except ServerNotAllowed as exc:
        raise PolicyError(str(exc)) from None


def server_key(origin: Origin) -> str | None:
    try:
        return model_servers.server_key(origin)
    except ServerNotAllowed as exc:
        raise PolicyError(str(exc)) from None


_shown = model_servers.shown


def api_root(base_url: str) -> str:
    """`http://host:8000`, `.../v1` and `.../v1/` all mean the same server."""
    root = base_url.strip().rstrip("/")
    return root if root.endswith("/v1") else f"{root}/v1"


def server_error(base_url: str, model: str, timeout: float = 3.0) -> str | None:
    """Why the server at `base_url` cannot serve `model` (GET /v1/models), or None.

    A server that lists models must list this one; one that lists none is given the benefit
    of the doubt (some proxies do not implement the listing). Nothing of the server's reply
    but its status and the model ids it lists (checked to be plain names) reaches the message.
    """
    try:
        origin = check_server(base_url)
    except PolicyError as exc:
        return str(exc)
    root = api_root(base_url)
    key = server_key(origin)
    try:
        response = httpx.get(
            f"{root}/models",
            timeout=timeout,
            headers={"Authorization": f"Bearer {key}"} if key else {},
            follow_redirects=False,
        )
    except httpx.TimeoutException:
        return f"model server {root} did not answer within {timeout:g} s"
    except httpx.HTTPError as exc:
        return f"cannot reach model server {root}: {type(exc).__name__}"
    if response.is_redirect:
        return f"model server {root} answered GET /models with a redirect (HTTP {response.status_code}), not followed"
    if response.status_code >= 300:
        return f"model server {root} answered HTTP {response.status_code} to GET /models"
    try:
        served = [str(m.get("id")) for m in response.json().get("data") or [] if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return f"model server {root} does not speak the OpenAI API (GET /models is not a model list)"
    if model and served and model not in served:
        shown = [name for name in served if _SERVED_ID.fullmatch(name)][:_SERVED_IDS_SHOWN]
        return f"model server {root} does not serve {model!r} (it serves: {', '.join(shown) or 'other models'})"
    return None


class OpenAIPolicy(Policy):
    kind = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        temperature: float = 0.8,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 256,
        api_key: str | None = None,
        timeout: float = 120,
        stop: list[str] | None = None,
    ) -> None:
        # Checked here too, not only on the launch form: a batch stored before the operator
        # narrowed the list, or one started from the command line, must not reach the server.
        origin = check_server(base_url)
        self.base_url = api_root(base_url)
        self.model = model
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = seed
        self.max_tokens = int(max_tokens)
        # Servers that cannot parse tool calls keep generating after one; a stop such as
        # ["</tool_call>"] saves that time. Off by default: it would cut real servers' parsers short.
        self.stop = stop
        key = api_key if api_key is not None else server_key(origin)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # A redirect would carry the request (and its key) wherever the server points it.
        self.client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, follow_redirects=False)

    def describe(self) -> dict[str, Any]:
        # A remote server does not say which weights it runs; the model name is the best handle.
        return {
            "kind": self.kind,
            "model": self.model,
            "checkpoint": self.model,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
        }

    def request_body(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        chat = to_openai_messages(messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
        }
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        if self.seed is not None:
            # Per-conversation seed, as the local policy does: reproducible steps that still differ.
            body["seed"] = derive_seed(self.seed, chat, tools) % (2**31)
        if self.stop:
            body["stop"] = self.stop
        return body

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        try:
            return self.client.post("/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise PolicyError(f"model server {self.base_url} did not answer within the timeout") from exc
        except httpx.HTTPError as exc:
            raise PolicyError(f"cannot reach model server {self.base_url}: {type(exc).__name__}") from exc

    def _complete(self, body: dict[str, Any]) -> httpx.Response:
        """The reply, asking for the sampled tokens where the server has not refused them."""
        if self.base_url in _REFUSE_TOKEN_FIELDS:
            return self._post(body)
        response = self._post({**body, **REQUEST_FIELDS})
        if response.status_code in _REFUSED:
            plain = self._post(body)
            if plain.status_code < 300:
                _REFUSE_TOKEN_FIELDS.add(self.base_url)
            return plain
        return response

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> PolicyOutput:
        body = self.request_body(messages, tools)
        started = time.monotonic()
        response = self._complete(body)
        latency_ms = (time.monotonic() - started) * 1000
        # The reply's body never goes into the error: it is the server's text, shown on pages and
        # stored with the trajectory, and a server on an internal address could say anything there.
        if response.is_redirect:
            raise PolicyError(
                f"model server {self.base_url} answered with a redirect (HTTP {response.status_code}), not followed"
            )
        if response.status_code >= 300:
            # 4xx too: a context overflow, a wrong model name or a bad key will not fix itself next step.
            raise PolicyError(f"model server {self.base_url} answered HTTP {response.status_code}")
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise PolicyError(
                f"model server {self.base_url} sent a reply that is not a chat completion "
                f"({len(response.content)} bytes)"
            ) from exc
        output = self.read_message(message)
        output.latency_ms = latency_ms
        output.generate_ms = latency_ms  # a server's generation is only visible as its request time
        output.usage = {k: v for k, v in (data.get("usage") or {}).items() if isinstance(v, int)}
        output.sampled = read_sampled(data, choice) if isinstance(data, dict) and isinstance(choice, dict) else {}
        fingerprint = data.get("system_fingerprint") if isinstance(data, dict) else None
        # Kept only as a plain short name: it is the server's text, shown with the step.
        if isinstance(fingerprint, str) and _SERVED_ID.fullmatch(fingerprint):
            output.fingerprint = fingerprint
        if output.tool_call is None and choice.get("finish_reason") == "length" and output.error:
            output.error = f"the reply hit the {self.max_tokens}-token limit; {output.error}"
        return output

    @staticmethod
    def read_message(message: dict[str, Any]) -> PolicyOutput:
        """The policy output for one assistant message of a chat completion."""
        content = message.get("content") or ""
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        calls = message.get("tool_calls") or []
        if calls:
            first = calls[0]
            raw = json.dumps({"content": content, "tool_calls": calls})
            call, why = (
                call_from_object(first, call_id=str(first.get("id") or "call_0"))
                if isinstance(first, dict)
                else (None, "the tool call is not a JSON object")
            )
            if call is None:
                return PolicyOutput(thought=content.strip(), tool_call=None, raw=raw, error=f"{why}. {FORMAT_HINT}")
            return PolicyOutput(thought=content.strip(), tool_call=call, raw=raw)
        parsed = parse_tool_call(content)
        return PolicyOutput(thought=parsed.thought, tool_call=parsed.tool_call, raw=content, error=parsed.error)

    def close(self) -> None:
        self.client.close()
