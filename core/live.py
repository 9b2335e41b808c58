"""Live groups: their names, and publishing to them only after the write has committed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from core.vocabulary import LiveGroup

# Group names are built from client input too (subscriptions), so they are checked
# against the only shapes the server ever publishes to and the channel layer's limits.
GROUP_RE = re.compile(rf"^({'|'.join(LiveGroup)})-[A-Za-z0-9_.-]{{1,64}}$")


def group_name(kind: LiveGroup, ident: object) -> str:
    return f"{kind}-{ident}"


def publish(group: str, event: Mapping[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(group, {"type": "live.event", "group": group, "event": event})


def publish_on_commit(group: str, event: Mapping[str, Any]) -> None:
    # A browser that hears about a step before its row is visible would fetch
    # nothing, so nothing reaches the channel layer until the commit.
    transaction.on_commit(lambda: publish(group, event))
