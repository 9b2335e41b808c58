"""The pinned redis-py (8.x) reads with a 5 s socket timeout by default, which breaks
channels_redis's blocking receive on an idle page (redis/redis-py#4091). This is the
failure that pin is known for: a page left idle must still get the next event."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

IDLE_S = 8.0  # past redis-py 8's 5 s default read timeout and channels_redis's 5 s block


def test_the_channel_layer_turns_off_redis_pys_read_timeout() -> None:
    layers: dict[str, Any] = settings.CHANNEL_LAYERS
    host = layers["default"]["CONFIG"]["hosts"][0]
    assert host["socket_timeout"] is None


@pytest.mark.timeout(60)
def test_an_idle_receiver_gets_the_next_message_without_a_redis_timeout() -> None:
    layer = get_channel_layer()
    assert layer is not None

    async def scenario() -> dict[str, object]:
        channel = await layer.new_channel()
        waiting = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(IDLE_S)
        # A TimeoutError inside receive() would have ended the task by now.
        assert not waiting.done(), waiting.exception()
        await layer.send(channel, {"type": "live.event", "n": 1})
        message = await asyncio.wait_for(waiting, timeout=10)
        await layer.flush()
        return message

    assert async_to_sync(scenario)() == {"type": "live.event", "n": 1}
