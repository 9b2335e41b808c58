"""The one WebSocket consumer: clients subscribe to live groups by name."""

from __future__ import annotations

import re
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from webapp.roles import REVIEWER, has_role

# Group names are built from client input, so they are checked against the only
# shapes the server ever publishes to (and the channel layer's own name limits).
GROUP_RE = re.compile(r"^(trajectory|batch|run|validation)-[A-Za-z0-9_.-]{1,64}$")
MAX_SUBSCRIPTIONS = 64


class LiveConsumer(AsyncJsonWebsocketConsumer):
    groups_joined: set[str]

    async def connect(self) -> None:
        user = self.scope.get("user")
        allowed = await database_sync_to_async(has_role)(user, REVIEWER)
        if not allowed:
            await self.close(code=4403)
            return
        self.groups_joined = set()
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", set()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            await self.send_json({"type": "error", "error": "messages must be JSON objects"})
            return
        action, group = content.get("action"), content.get("group")
        if action not in {"subscribe", "unsubscribe"} or not isinstance(group, str) or not GROUP_RE.match(group):
            await self.send_json(
                {"type": "error", "error": "expected {action: subscribe|unsubscribe, group: trajectory-<id>|batch-<id>|run-<id>|validation-<id>}"}
            )
            return
        if action == "subscribe":
            if group not in self.groups_joined and len(self.groups_joined) >= MAX_SUBSCRIPTIONS:
                await self.send_json({"type": "error", "error": f"at most {MAX_SUBSCRIPTIONS} subscriptions"})
                return
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.add(group)
        else:
            await self.channel_layer.group_discard(group, self.channel_name)
            self.groups_joined.discard(group)
        await self.send_json({"type": f"{action}d", "group": group})

    async def live_event(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": "event", "group": message["group"], "event": message["event"]})
