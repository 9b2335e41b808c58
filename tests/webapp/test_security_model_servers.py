"""The openai policy talks only to servers the operator lists, sends a key only to its own server,
follows no redirect and never puts a server's reply into an error."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import User

from tasks.models import TaskSuite
from tasks.services import import_task_dirs
from tests.conftest import DEMO, client_for
from trajectories.models import RolloutBatch
from trajectories.policies.base import Message, PolicyError
from trajectories.policies.openai import OpenAIPolicy, server_error

KEY = "sk-operator-secret-0123456789"
BODY_SECRET = "INTERNAL-ONLY <script>alert(1)</script>"
COMPLETION = {"choices": [{"message": {"role": "assistant", "content": "thinking"}, "finish_reason": "stop"}]}


@dataclass
class Recorded:
    url: str
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Authorization)

    def authorizations(self) -> list[str | None]:
        return [auth for _path, auth in self.requests]


def serve(reply: str, redirect_to: str = "") -> Iterator[Recorded]:
    """A real loopback HTTP server that records the Authorization header of every request."""
    record = Recorded("")

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            record.requests.append((self.path, self.headers.get("Authorization")))
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if redirect_to:
                self.send_response(307)
                self.send_header("Location", f"{redirect_to}{self.path}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if reply == "models":
                status, body = 200, json.dumps({"data": [{"id": "served-model"}]})
            elif reply == "completion":
                status, body = 200, json.dumps(COMPLETION)
            elif reply == "error":
                status, body = 500, json.dumps({"error": BODY_SECRET})
            else:
                status, body = 200, BODY_SECRET
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = answer  # noqa: N815 - the http.server API

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    record.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield record
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def models() -> Iterator[Recorded]:
    yield from serve("models")


@pytest.fixture
def completions() -> Iterator[Recorded]:
    yield from serve("completion")


@pytest.fixture
def operator_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for name in ("OPENAI_BASE_URL", "CRUCIBLE_MODEL_SERVERS", "CRUCIBLE_MODEL_SERVER_KEYS"):
        monkeypatch.delenv(name, raising=False)


def ask(url: str) -> None:
    policy = OpenAIPolicy(url, "served-model", max_tokens=4, timeout=10)
    try:
        policy.act([Message("user", "hi")], [])
    finally:
        policy.close()


@pytest.mark.usefixtures("operator_key")
def test_the_operators_key_goes_to_no_server_it_was_not_set_for(models: Recorded, completions: Recorded) -> None:
    assert server_error(models.url, "served-model") is None
    ask(completions.url)
    assert models.authorizations() == [None] and completions.authorizations() == [None]


@pytest.mark.usefixtures("operator_key")
def test_a_key_is_sent_to_the_server_it_is_mapped_to_and_only_there(
    models: Recorded, completions: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_VLLM_KEY", "vllm-key")
    monkeypatch.setenv("CRUCIBLE_MODEL_SERVER_KEYS", f"{completions.url}=LOCAL_VLLM_KEY")
    ask(completions.url + "/v1/")
    assert server_error(models.url, "served-model") is None
    assert completions.authorizations() == ["Bearer vllm-key"]
    assert models.authorizations() == [None]
    # OPENAI_BASE_URL names where OPENAI_API_KEY belongs when no mapping is given.
    monkeypatch.delenv("CRUCIBLE_MODEL_SERVER_KEYS")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{models.url}/v1")
    assert server_error(models.url, "served-model") is None
    ask(completions.url)
    assert models.authorizations() == [None, f"Bearer {KEY}"]
    assert completions.authorizations() == ["Bearer vllm-key", None]


@pytest.mark.usefixtures("operator_key")
def test_only_listed_servers_are_asked_at_all(
    models: Recorded, completions: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_MODEL_SERVERS", f"{models.url},https://models.example.com")
    assert server_error(models.url, "served-model") is None
    refused = server_error(completions.url, "served-model")
    assert refused is not None and "is not allowed" in refused and "CRUCIBLE_MODEL_SERVERS" in refused
    with pytest.raises(PolicyError, match="is not allowed"):
        ask(completions.url)
    for sneaky in (
        f"http://127.0.0.1:{completions.url.rsplit(':', 1)[1]}@10.0.0.1/",  # credentials, then another host
        "http://169.254.169.254/latest/meta-data/",
        "https://models.example.com.attacker.net/v1",
        "file:///etc/passwd",
        "http://[::1/",
    ):
        problem = server_error(sneaky, "served-model")
        assert problem is not None and len(problem) < 400, sneaky
    assert completions.requests == []
    assert len(models.requests) == 1
    # A typo in the setting is named as such, and allows nothing.
    monkeypatch.setenv("CRUCIBLE_MODEL_SERVERS", "gpu1:8000")
    assert (server_error(models.url, "served-model") or "").startswith("CRUCIBLE_MODEL_SERVERS: 'gpu1:8000' is not")


@pytest.mark.usefixtures("operator_key")
def test_a_redirect_is_refused_and_the_key_does_not_follow_it(
    completions: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    redirector = serve("", redirect_to=completions.url)
    hop = next(redirector)
    try:
        monkeypatch.setenv("OPENAI_API_KEY_HOP", "hop-key")
        monkeypatch.setenv("CRUCIBLE_MODEL_SERVER_KEYS", f"{hop.url}=OPENAI_API_KEY_HOP")
        with pytest.raises(PolicyError, match=r"redirect \(HTTP 307\), not followed"):
            ask(hop.url)
        problem = server_error(hop.url, "served-model")
        assert problem is not None and "redirect" in problem
        assert hop.authorizations() == ["Bearer hop-key", "Bearer hop-key"]
        assert completions.requests == []
    finally:
        next(redirector, None)


@pytest.mark.parametrize("reply", ["error", "garbage"])
@pytest.mark.usefixtures("operator_key")
def test_errors_say_what_went_wrong_without_the_servers_reply(reply: str) -> None:
    server = serve(reply)
    url = next(server).url
    try:
        with pytest.raises(PolicyError) as caught:
            ask(url)
        message = str(caught.value)
        assert BODY_SECRET not in message and "INTERNAL-ONLY" not in message and "<script>" not in message
        assert message.startswith(f"model server {url}/v1 ")
        assert ("HTTP 500" in message) if reply == "error" else ("not a chat completion" in message)
        problem = server_error(url, "served-model") or ""
        assert "INTERNAL-ONLY" not in problem
    finally:
        next(server, None)


@pytest.mark.django_db
@pytest.mark.usefixtures("operator_key")
def test_the_launch_form_refuses_an_unlisted_server_before_asking_it(
    researcher: User, models: Recorded, completions: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_task_dirs(DEMO / "tasks" / "task_0001", "small")
    assert TaskSuite.objects.filter(name="small").exists()
    monkeypatch.setenv("CRUCIBLE_MODEL_SERVERS", models.url)
    form = {"suite": "small", "policy": "openai", "model": "served-model", "samples": "1"}
    form |= {"temperature": "0.8", "max_steps": "5", "sandbox": "bwrap"}
    client = client_for(researcher)
    response = client.post("/batches/", form | {"base_url": completions.url})
    assert response.status_code == 400 and "is not allowed" in response.content.decode()
    assert completions.requests == [] and not RolloutBatch.objects.exists()
    response = client.post("/batches/", form | {"base_url": models.url})
    assert response.status_code == 302 and RolloutBatch.objects.count() == 1
    assert models.authorizations() == [None]


@pytest.mark.django_db
def test_a_batch_on_an_unlisted_server_is_refused_before_anything_is_queued() -> None:
    from trajectories.batches import start_batch
    from trajectories.rollout_settings import RolloutError, RolloutSettings

    import_task_dirs(DEMO / "tasks" / "task_0001", "unlisted")
    with pytest.raises(RolloutError, match="is not allowed"):
        start_batch(
            TaskSuite.objects.get(name="unlisted"), RolloutSettings("openai", "m", base_url="http://10.0.0.8:8000")
        )
    assert not RolloutBatch.objects.exists()
