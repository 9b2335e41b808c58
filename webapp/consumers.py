"""The one WebSocket consumer: clients subscribe to live groups by name."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from importlib import import_module
from typing import Any

from channels.auth import get_user
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from core.limits import LIVE_MAX_SUBSCRIPTIONS as MAX_SUBSCRIPTIONS
from core.live import GROUP_RE
from core.roles import REVIEWER, has_role
from core.vocabulary import LiveGroup

logger = logging.getLogger(__name__)

GROUP_SHAPES = "|".join(f"{kind}-<id>" for kind in LiveGroup)
REFUSED = 4403  # no session, or a user without a role: never accepted
SESSION_ENDED = 4401  # accepted once, but the session has since ended or lost its role


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """A socket outlives the page that opened it: it is accepted for a session, and stays open only
    while that session lasts and its user keeps a role. A logout, a password change, a deactivation
    or a role taken away closes it (code 4401) at the next frame the client sends, before the next
    event goes out (at most one check per `recheck_events_s`), and otherwise within `recheck_idle_s`."""

    recheck_events_s = 2.0
    recheck_idle_s = 30.0
    groups_joined: set[str]
    user_pk: int
    checked_at: float
    ended = False
    watcher: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        allowed = await database_sync_to_async(has_role)(user, REVIEWER)
        if not allowed:
            await self.close(code=REFUSED)
            return
        self.user_pk = user.pk
        self.groups_joined = set()
        self.checked_at = time.monotonic()
        await self.accept()
        self.watcher = asyncio.create_task(self.watch_session())

    async def disconnect(self, code: int) -> None:
        if self.watcher is not None:
            self.watcher.cancel()
        for group in getattr(self, "groups_joined", set()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def session_is_live(self) -> bool:
        """Read the session again from its store: the scope's copy was loaded at connect time."""
        self.checked_at = time.monotonic()
        session = self.scope.get("session")
        key = getattr(session, "session_key", None)
        if not key:
            return False
        store = import_module(settings.SESSION_ENGINE).SessionStore(key)
        user = await get_user({"session": store})
        return user.pk == self.user_pk and await database_sync_to_async(has_role)(user, REVIEWER)

    async def end_if_session_ended(self) -> bool:
        if self.ended:
            return True
        if await self.session_is_live():
            return False
        self.ended = True
        logger.info("live socket of user %s closed: its session ended or lost its role", self.user_pk)
        # Out of every group first: nothing more reaches this socket while it closes.
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_joined = set()
        await self.close(code=SESSION_ENDED)
        return True

    async def watch_session(self) -> None:
        """Idle sockets, which send nothing and get no events, are checked on a timer."""
        with contextlib.suppress(asyncio.CancelledError):
            while not self.ended:
                await asyncio.sleep(max(0.0, self.checked_at + self.recheck_idle_s - time.monotonic()))
                if time.monotonic() - self.checked_at < self.recheck_idle_s:
                    continue  # a frame or an event checked it meanwhile
                try:
                    await self.end_if_session_ended()
                except Exception:
                    # The database away for a moment: try again at the next tick, keep the socket.
                    logger.exception("live socket of user %s: the session check failed", self.user_pk)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if await self.end_if_session_ended():
            return
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
        if time.monotonic() - self.checked_at >= self.recheck_events_s and await self.end_if_session_ended():
            return
        await self.send_json({"type": "event", "group": message["group"], "event": message["event"]})
