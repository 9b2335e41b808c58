"""A live socket lasts only as long as its session and its user's role (the real ASGI app, the
real Redis channel layer, the real session store)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from core.live import publish_on_commit
from tests.conftest import client_for
from webapp.asgi import application
from webapp.consumers import SESSION_ENDED, LiveConsumer

pytestmark = pytest.mark.django_db(transaction=True)
GROUP = "batch-7"


def socket_for(client: Client) -> WebsocketCommunicator:
    session = client.cookies["sessionid"].value
    headers = [(b"origin", b"http://localhost"), (b"cookie", f"sessionid={session}".encode())]
    return WebsocketCommunicator(application, "/ws/", headers=headers)


def subscribed_then(
    client: Client, change: Callable[[], None], after: Callable[[WebsocketCommunicator], Awaitable[None]]
) -> dict[str, Any]:
    """Open a socket as the client, subscribe, make the change, run `after`; what the socket got next."""

    async def scenario() -> dict[str, Any]:
        ws = socket_for(client)
        assert (await ws.connect())[0]
        await ws.send_json_to({"action": "subscribe", "group": GROUP})
        assert (await ws.receive_json_from(timeout=5))["type"] == "subscribed"
        await sync_to_async(change)()
        await after(ws)
        output: dict[str, Any] = await ws.receive_output(timeout=5)
        await ws.disconnect()
        return output

    return async_to_sync(scenario)()


async def send_a_frame(ws: WebsocketCommunicator) -> None:
    await ws.send_json_to({"action": "subscribe", "group": "run-1"})


async def nothing(ws: WebsocketCommunicator) -> None:
    pass


CLOSED = {"type": "websocket.close", "code": SESSION_ENDED}


def test_a_socket_is_closed_when_its_session_ends_or_its_user_loses_the_role(
    reviewer: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a logout, the next frame the page sends closes the socket.
    client = client_for(reviewer)
    assert subscribed_then(client, client.logout, send_a_frame) == CLOSED
    # A socket that sends nothing is closed by the idle check.
    monkeypatch.setattr(LiveConsumer, "recheck_idle_s", 0.3)
    client = client_for(reviewer)
    assert subscribed_then(client, client.logout, nothing) == CLOSED
    # A role taken away: the socket closes instead of passing on the next event.
    monkeypatch.setattr(LiveConsumer, "recheck_idle_s", 30.0)
    monkeypatch.setattr(LiveConsumer, "recheck_events_s", 0.0)

    def demote() -> None:
        reviewer.groups.clear()
        publish_on_commit(GROUP, {"secret": "for reviewers only"})

    assert subscribed_then(client_for(reviewer), demote, nothing) == CLOSED


def test_a_socket_whose_session_lasts_stays_open_and_gets_events(
    reviewer: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(LiveConsumer, "recheck_events_s", 0.0)
    monkeypatch.setattr(LiveConsumer, "recheck_idle_s", 0.2)

    async def idle_then_event(ws: WebsocketCommunicator) -> None:
        assert await ws.receive_nothing(timeout=0.8)  # several idle checks, all passed
        await sync_to_async(publish_on_commit)(GROUP, {"step": 1})

    got = subscribed_then(client_for(reviewer), lambda: None, idle_then_event)
    assert got["type"] == "websocket.send" and '"step": 1' in got["text"]
