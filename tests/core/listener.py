"""A listener on the real channel layer: a plain channel of its own, added to groups.

What `core.domain_events` sends to a group lands in this channel's queue in Redis, whichever
process sent it (the test, a killed child, a Celery worker), and is read back here. A plain
channel name (no `!`), so each read may run on a fresh event loop (async_to_sync).
"""

import asyncio
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings


def redis_layer_configured() -> bool:
    return settings.CHANNEL_LAYERS["default"]["BACKEND"].endswith("RedisChannelLayer")


class GroupListener:
    def __init__(self, *groups: str) -> None:
        self.layer = get_channel_layer()
        self.channel = f"outbox-test-{uuid.uuid4().hex}"
        self.groups: list[str] = []
        self.add(*groups)

    def add(self, *groups: str) -> None:
        async def add() -> None:
            for group in groups:
                await self.layer.group_add(group, self.channel)

        async_to_sync(add)()
        self.groups += groups

    def receive(self, timeout: float = 5.0) -> dict[str, Any] | None:
        """The next message, or None when none arrives within `timeout` seconds."""

        async def receive() -> dict[str, Any] | None:
            try:
                return await asyncio.wait_for(self.layer.receive(self.channel), timeout)
            except TimeoutError:
                return None

        return async_to_sync(receive)()

    def receive_all(self, quiet: float = 0.5) -> list[dict[str, Any]]:
        """Every message until none arrives for `quiet` seconds."""
        messages = []
        while (message := self.receive(timeout=quiet)) is not None:
            messages.append(message)
        return messages

    def close(self) -> None:
        async def discard() -> None:
            for group in self.groups:
                await self.layer.group_discard(group, self.channel)

        async_to_sync(discard)()
