"""The WebSocket endpoint through the real ASGI app and the real Redis channel layer."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import transaction

from core.live import publish_on_commit
from tests.conftest import client_for
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def headers_for(user: User | None) -> list[tuple[bytes, bytes]]:
    """Browser-like headers: an allowed Origin and, for a user, their session cookie."""
    headers = [(b"origin", b"http://localhost")]
    if user is not None:
        session = client_for(user).cookies["sessionid"].value
        headers.append((b"cookie", f"sessionid={session}".encode()))
    return headers


def communicator(headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, "/ws/", headers=headers)


def write_and_publish(group: str, event: dict[str, Any], commit: bool) -> None:
    try:
        with transaction.atomic():
            publish_on_commit(group, event)
            if not commit:
                raise RuntimeError("roll back")
    except RuntimeError:
        pass


def test_a_subscriber_gets_events_only_for_committed_writes(reviewer: User) -> None:
    headers = headers_for(reviewer)

    async def scenario() -> None:
        ws = communicator(headers)
        connected, _ = await ws.connect()
        assert connected
        await ws.send_json_to({"action": "subscribe", "group": "trajectory-42"})
        assert await ws.receive_json_from(timeout=5) == {"type": "subscribed", "group": "trajectory-42"}
        await sync_to_async(write_and_publish)("trajectory-42", {"step": 1}, False)
        assert await ws.receive_nothing(timeout=0.5)
        await sync_to_async(write_and_publish)("trajectory-42", {"step": 2}, True)
        assert await ws.receive_json_from(timeout=5) == {
            "type": "event",
            "group": "trajectory-42",
            "event": {"step": 2},
        }
        await sync_to_async(write_and_publish)("trajectory-43", {"step": 3}, True)
        assert await ws.receive_nothing(timeout=0.5)  # not subscribed to that one
        await ws.disconnect()

    async_to_sync(scenario)()


def test_strangers_and_bad_subscriptions_are_refused(outsider: User, reviewer: User) -> None:
    allowed = headers_for(reviewer)
    cross_site = [(b"origin", b"http://evil.example"), allowed[1]]  # a real session, a foreign page
    strangers = [headers_for(None), headers_for(outsider), cross_site]

    async def scenario() -> None:
        for headers in strangers:
            connected, _code = await communicator(headers).connect()
            assert not connected
        ws = communicator(allowed)
        assert (await ws.connect())[0]
        for bad in (
            {"action": "subscribe", "group": "everything"},
            {"action": "subscribe", "group": "run-" + "x" * 200},
            ["not", "an", "object"],
            {"action": "delete", "group": "run-1"},
        ):
            await ws.send_json_to(bad)
            assert (await ws.receive_json_from(timeout=5))["type"] == "error"
        await ws.disconnect()

    async_to_sync(scenario)()
