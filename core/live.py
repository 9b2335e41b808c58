"""Live groups: their names, and publishing to them only after the write has committed."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from redis.exceptions import RedisError

from core.vocabulary import LiveGroup

logger = logging.getLogger(__name__)

# Group names are built from client input too (subscriptions), so they are checked
# against the only shapes the server ever publishes to and the channel layer's limits.
GROUP_RE = re.compile(rf"^({'|'.join(LiveGroup)})-[A-Za-z0-9_.-]{{1,64}}$")


def group_name(kind: LiveGroup, ident: object) -> str:
    return f"{kind}-{ident}"


def publish(group: str, event: Mapping[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, {"type": "live.event", "group": group, "event": event})
    except (RedisError, OSError) as exc:
        # Live events are a courtesy: the write they announce has committed, and a page that
        # missed one resynchronises from the API when its socket comes back. Redis being away
        # must not fail the rollout, import or scoring that published it.
        logger.warning("live event to %s not sent, Redis unavailable: %s", group, exc)


def publish_on_commit(group: str, event: Mapping[str, Any]) -> None:
    # A browser that hears about a step before its row is visible would fetch
    # nothing, so nothing reaches the channel layer until the commit.
    transaction.on_commit(lambda: publish(group, event))
