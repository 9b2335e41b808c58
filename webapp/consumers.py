"""The one WebSocket consumer: clients subscribe to live groups by name."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core.limits import LIVE_MAX_SUBSCRIPTIONS as MAX_SUBSCRIPTIONS
from core.live import GROUP_RE
from core.roles import REVIEWER, has_role
from core.vocabulary import LiveGroup

GROUP_SHAPES = "|".join(f"{kind}-<id>" for kind in LiveGroup)


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
                {"type": "error", "error": f"expected {{action: subscribe|unsubscribe, group: {GROUP_SHAPES}}}"}
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
