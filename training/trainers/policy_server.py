"""The policy a GRPO run is training, served to the rollout fleet: an OpenAI-compatible chat endpoint.

In `environment.episodes: fleet` the trainer computes losses only; its episodes run as ordinary
rollouts on the Celery `rollouts` workers, whose `openai` policy asks this server for every turn.
The server holds its own copy of the weights, refreshed from the trainer's model (`sync`) when the
copy is more than `rl.max_staleness` optimizer steps behind, so a generation never waits for a
backward pass and a sample is never older than the bound.

Every reply names the weights that wrote it (`system_fingerprint: crucible-policy-v<step>`, the
optimizer step they were synced at) and reports what it sampled (`prompt_token_ids`, the choice's
`token_ids` and `logprobs`), which the worker's policy keeps with each step: the trainer learns
from exactly those tokens, and from the fingerprints tells each sample's staleness.

It renders and generates as the `hf` policy does (the tokenizer's chat template with the tool
schemas, one tool call per turn, a per-request seed), one request at a time (a CPU host has no
batch to fill; on a GPU host vLLM is the server to use). Plain Python: no Django. It listens on
loopback unless CRUCIBLE_POLICY_SERVER_HOST says otherwise (workers on other hosts).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trajectories.policies.chat import CLOSE_TAG

HOST_ENV = "CRUCIBLE_POLICY_SERVER_HOST"
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_TOKENS_CAP = 16_384
FINGERPRINT = "crucible-policy-v{version}"
_FINGERPRINT = re.compile(r"crucible-policy-v(\d{1,9})")


def policy_version(fingerprint: Any) -> int | None:
    """The policy version a reply's fingerprint names; None for another server's."""
    match = _FINGERPRINT.fullmatch(fingerprint) if isinstance(fingerprint, str) else None
    return int(match.group(1)) if match else None


class RequestError(ValueError):
    pass


class PolicyServer:
    """A copy of the trainer's policy behind /v1/chat/completions; `version` is the step it was synced at."""

    def __init__(self, model: Any, tokenizer: Any, name: str = "crucible-policy", host: str | None = None) -> None:
        self.name = name
        self.tokenizer = tokenizer
        self.model = copy.deepcopy(model).eval()
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)
        self.version = 0
        self.syncs = 0
        self.requests = 0
        self._generate = threading.Lock()
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        self._eos = [eos] if isinstance(eos, int) else list(eos or [tokenizer.eos_token_id])
        self._pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self._eos[0]
        self._context = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        self._httpd = ThreadingHTTPServer((host or os.environ.get(HOST_ENV, "127.0.0.1"), 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="policy-server", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def fingerprint(self) -> str:
        return FINGERPRINT.format(version=self.version)

    def start(self) -> PolicyServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def sync(self, model: Any, version: int) -> None:
        """Take the trainer's current weights; replies from now on name `version`."""
        import torch

        with self._generate, torch.no_grad():
            self.model.load_state_dict(model.state_dict())
            self.version = int(version)
            self.syncs += 1

    def complete(self, body: Any) -> dict[str, Any]:
        """One chat completion, as an OpenAI server answers it (plus the sampled ids)."""
        import torch
        from transformers import GenerationConfig

        messages, tools, settings = _request(body, self.name)
        try:
            enc = self.tokenizer.apply_chat_template(
                messages, tools=tools or None, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        except Exception as exc:  # jinja raises many types: the request is what cannot be rendered
            raise RequestError(f"cannot render the chat template: {str(exc)[:200]}") from None
        prompt_len = int(enc["input_ids"].shape[1])
        budget = min(settings["max_tokens"], self._context - prompt_len) if self._context else settings["max_tokens"]
        if budget < 1:
            raise RequestError(f"the conversation is {prompt_len} tokens; the model's context is {self._context}")
        sample = settings["temperature"] > 0
        config = GenerationConfig(
            max_new_tokens=budget,
            do_sample=sample,
            temperature=settings["temperature"] if sample else None,
            top_p=settings["top_p"] if sample else None,
            top_k=0 if sample else None,
            eos_token_id=self._eos,
            pad_token_id=self._pad,
            stop_strings=[CLOSE_TAG],
            return_dict_in_generate=True,
            output_scores=True,
        )
        with self._generate, torch.random.fork_rng(devices=[]), torch.inference_mode():
            version = self.version
            if settings["seed"] is not None:
                torch.manual_seed(settings["seed"])
            out = self.model.generate(**enc.to(self.model.device), generation_config=config, tokenizer=self.tokenizer)
            # The sampling distribution's logprobs (after temperature and top_p), one per new token.
            scores = self.model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
            self.requests += 1
        new = out.sequences[0, prompt_len:].tolist()
        used = prompt_len + len(new)
        logprobs = [float(v) if math.isfinite(v) else -1e9 for v in scores[0].tolist()][: len(new)]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        finish = "stop" if new and (new[-1] in self._eos or text.rstrip().endswith(CLOSE_TAG)) else "length"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "system_fingerprint": FINGERPRINT.format(version=version),
            "prompt_token_ids": enc["input_ids"][0].tolist(),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                    "token_ids": new,
                    "logprobs": {"content": [{"token": "", "logprob": lp} for lp in logprobs]},
                }
            ],
            "usage": {"prompt_tokens": prompt_len, "completion_tokens": len(new), "total_tokens": used},
        }


def _request(body: Any, name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The messages, tools and sampling settings of a chat request, checked."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if body.get("model") not in (None, name):
        raise RequestError(f"this server serves {name!r} only")
    messages, tools = body.get("messages"), body.get("tools") or []
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise RequestError("messages must be a non-empty list of objects")
    if not isinstance(tools, list):
        raise RequestError("tools must be a list")
    settings: dict[str, Any] = {}
    for key, default, low, high in (("temperature", 1.0, 0.0, 2.0), ("top_p", 1.0, 0.0, 1.0)):
        value = body.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise RequestError(f"{key} must be a number in [{low:g}, {high:g}]")
        settings[key] = float(value)
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens", 256))
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= MAX_TOKENS_CAP:
        raise RequestError(f"max_tokens must be a whole number in [1, {MAX_TOKENS_CAP}]")
    settings["max_tokens"] = max_tokens
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise RequestError("seed must be a whole number")
    settings["seed"] = None if seed is None else seed % (2**63)
    return messages, tools, settings


def _handler(server: PolicyServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            return  # the trainer's stderr is its log; a line per request would drown it

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/health":
                self._send(HTTPStatus.OK, {"status": "ok", "version": server.version})
            elif self.path.rstrip("/") == "/v1/models":
                self._send(HTTPStatus.OK, {"object": "list", "data": [{"id": server.name, "object": "model"}]})
            else:
                self._send(HTTPStatus.NOT_FOUND, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(HTTPStatus.NOT_FOUND, {"error": {"message": "not found"}})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 < length <= MAX_BODY_BYTES:
                self._send(HTTPStatus.BAD_REQUEST, {"error": {"message": f"a body of 1 to {MAX_BODY_BYTES} bytes"}})
                return
            try:
                reply = server.complete(json.loads(self.rfile.read(length)))
            except (RequestError, ValueError) as exc:
                self._send(HTTPStatus.BAD_REQUEST, {"error": {"message": str(exc)[:500]}})
                return
            self._send(HTTPStatus.OK, reply)

    return Handler
