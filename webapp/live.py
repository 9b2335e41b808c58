"""Publishing to live groups, only after the write that caused it has committed."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction


def publish(group: str, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(group, {"type": "live.event", "group": group, "event": event})


def publish_on_commit(group: str, event: dict[str, Any]) -> None:
    # A browser that hears about a step before its row is visible would fetch
    # nothing, so nothing reaches the channel layer until the commit.
    transaction.on_commit(lambda: publish(group, event))
