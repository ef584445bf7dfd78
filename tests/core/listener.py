"""A listener on the real channel layer: a channel of its own, added to groups.

What `core.domain_events` sends to a group reaches this channel through Redis, whichever
process sent it (the test, a killed child, a Celery worker). The layer is Redis pub/sub: a
channel hears only while it is subscribed, as a live page's websocket consumer does for as
long as it is connected. So the listener keeps an event loop of its own running in a thread,
subscribed from the start and reading into a queue, and `receive` reads that queue.
"""

import asyncio
import queue
import threading
import uuid
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings


def redis_layer_configured() -> bool:
    return settings.CHANNEL_LAYERS["default"]["BACKEND"].startswith("channels_redis.")


class GroupListener:
    def __init__(self, *groups: str) -> None:
        self.layer = get_channel_layer()
        self.channel = f"outbox-test-{uuid.uuid4().hex}"
        self.groups: list[str] = []
        self.heard: queue.Queue[dict[str, Any]] = queue.Queue()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.reader = self._run(self._start_reading())
        self.add(*groups)

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=10)

    async def _start_reading(self) -> "asyncio.Task[None]":
        return asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            self.heard.put(await self.layer.receive(self.channel))

    def add(self, *groups: str) -> None:
        async def add() -> None:
            for group in groups:
                await self.layer.group_add(group, self.channel)

        self._run(add())
        self.groups += groups

    def receive(self, timeout: float = 5.0) -> dict[str, Any] | None:
        """The next message, or None when none arrives within `timeout` seconds."""
        try:
            return self.heard.get(timeout=timeout)
        except queue.Empty:
            return None

    def receive_all(self, quiet: float = 0.5) -> list[dict[str, Any]]:
        """Every message until none arrives for `quiet` seconds."""
        messages = []
        while (message := self.receive(timeout=quiet)) is not None:
            messages.append(message)
        return messages

    def close(self) -> None:
        async def discard() -> None:
            self.reader.cancel()
            for group in self.groups:
                await self.layer.group_discard(group, self.channel)
            await self.layer.flush()

        try:
            self._run(discard())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
            self.loop.close()
