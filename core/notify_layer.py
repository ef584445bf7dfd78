"""A channel layer on PostgreSQL's LISTEN/NOTIFY, for a deployment without Redis (the embedded
default of `bash scripts/run`): what a Celery worker, beat or another server process sends
reaches the websockets of every server process.

Each process keeps its consumers' channels and group memberships in memory (channels'
InMemoryChannelLayer, unchanged). A group send is one NOTIFY on the database the deployment
already has, on the sender's own Django connection: inside a transaction it goes out when that
commits and not at all if it rolls back (the outbox relay marks its rows sent in the same
transaction). A process whose consumers joined groups holds one extra connection that LISTENs,
and hands every notice it hears to its in-memory groups; a process without consumers (a
worker, beat) never listens. NOTIFY carries at most 8000 bytes: a larger message is stored in a
row (core_livenotice) and the notice names it.

Why not Redis's layer: there is no Redis on the embedded default. Why not `channels-postgres`
(checked 1.1.4 on psycopg 3.3.9, Django 6.0.10, channels 4.3.2; it works across processes):
it needs a second DATABASES alias for its ORM calls, inserts a table row per member channel of
every group send (two SELECTs and the INSERT, about 11 ms a send here), leaves those rows for
10-20 minutes, takes a session advisory lock per websocket channel on pooled connections that
never releases it, and a starting listener deletes every process's queued messages. This layer
is one statement per send and no table for anything under 8000 bytes.

If the listening connection is lost (the database restarted), the sockets of the process are
closed with 1013 (core.live: the page shows "Reconnecting…") and a new handshake is refused
until it listens again: a page is never shown as live while notices cannot reach it.
"""

import asyncio
import contextlib
import json
import logging
from typing import Any

import psycopg
from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer, InMemoryChannelLayer
from django.db import connections

from . import storage

logger = logging.getLogger(__name__)

# NOTIFY's payload must be shorter than 8000 bytes (PostgreSQL's default build).
NOTIFY_LIMIT = 7999
# Sent to every local channel of a process whose listening connection was lost.
FEED_LOST = {"type": "live.feed_lost"}


class LiveFeedUnavailable(OSError):
    """The process cannot listen for notices now (an OSError: core.live answers 1013)."""


class PostgresNotifyChannelLayer(BaseChannelLayer):
    """Groups across processes through NOTIFY; channels and memberships in this process."""

    extensions = ["groups", "flush"]

    def __init__(
        self,
        database: str = "default",
        expiry: int = 60,
        group_expiry: int = 86400,
        capacity: int = 100,
        channel_capacity: Any = None,
    ) -> None:
        super().__init__(expiry=expiry, capacity=capacity, channel_capacity=channel_capacity)
        self.database = database
        self.local = InMemoryChannelLayer(
            expiry=expiry,
            group_expiry=group_expiry,
            capacity=capacity,
            channel_capacity=channel_capacity,
        )
        self._listener: asyncio.Task[None] | None = None
        self._listening: asyncio.Future[None] | None = None

    # --- Sending: NOTIFY on the caller's connection ---------------------------------------

    def publish_from_thread(self, groups: list[str], message: dict[str, Any]) -> None:
        """Send `message` to `groups` in every process, from a sync thread, on its Django
        connection: within the caller's transaction when there is one (core.realtime)."""
        for group in groups:
            self.require_valid_group_name(group)
        body = json.dumps({"groups": groups, "message": message}, separators=(",", ":"))
        if len(body.encode()) <= NOTIFY_LIMIT:
            storage.notify_live(connections[self.database], body)
        else:
            storage.notify_live_stored(connections[self.database], body)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await self.group_send_all([group], message)

    async def group_send_all(self, groups: list[str], message: dict[str, Any]) -> None:
        await database_sync_to_async(self.publish_from_thread)(groups, message)

    # --- Receiving: this process's channels -------------------------------------------------

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        """A channel of this process (no consumer of this project sends to one elsewhere)."""
        await self.local.send(channel, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        message: dict[str, Any] = await self.local.receive(channel)
        return message

    async def new_channel(self, prefix: str = "specific.") -> str:
        name: str = await self.local.new_channel(prefix)
        return name

    async def group_add(self, group: str, channel: str) -> None:
        """Join, once this process listens (LiveFeedUnavailable when it cannot)."""
        await self._ensure_listening()
        await self.local.group_add(group, channel)

    async def group_discard(self, group: str, channel: str) -> None:
        await self.local.group_discard(group, channel)

    async def flush(self) -> None:
        await self.local.flush()

    async def close(self) -> None:
        """Stop listening (its connection closes with it)."""
        listener, self._listener = self._listener, None
        if listener is None or listener.done():
            return
        listener.cancel()
        if listener.get_loop() is asyncio.get_running_loop():
            with contextlib.suppress(asyncio.CancelledError):
                await listener

    async def _ensure_listening(self) -> None:
        loop = asyncio.get_running_loop()
        listener = self._listener
        if listener is None or listener.done() or listener.get_loop() is not loop:
            self._listening = loop.create_future()
            self._listener = loop.create_task(self._listen(self._listening))
        assert self._listening is not None
        try:
            await asyncio.shield(self._listening)
        except Exception as exc:
            raise LiveFeedUnavailable(f"cannot listen for live notices: {exc}") from exc

    async def _listen(self, listening: asyncio.Future[None]) -> None:
        try:
            conn = await psycopg.AsyncConnection.connect(self._conninfo(), autocommit=True)
        except Exception as exc:
            listening.set_exception(exc)
            listening.exception()  # retrieved: a refused handshake reports it
            return
        try:
            async with conn:
                await conn.execute(storage.LISTEN_LIVE)
                listening.set_result(None)
                async for notice in conn.notifies():
                    await self._deliver(notice.payload)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("live notices: the listening connection was lost (%s)", exc)
        if not listening.done():
            listening.set_exception(LiveFeedUnavailable("the listening connection closed"))
            listening.exception()
        await self._feed_lost()

    async def _deliver(self, payload: str) -> None:
        try:
            if payload.startswith("@"):
                payload = await self._stored(int(payload[1:]))
            notice = json.loads(payload)
            groups, message = notice["groups"], notice["message"]
        except Exception:
            logger.exception("live notices: unreadable notice %.200r", payload)
            return
        for group in groups:
            await self.local.group_send(group, message)

    async def _stored(self, notice_id: int) -> str:
        async with await psycopg.AsyncConnection.connect(self._conninfo(), autocommit=True) as conn:
            cursor = await conn.execute(storage.STORED_LIVE_NOTICE, [notice_id])
            row = await cursor.fetchone()
        if row is None:
            raise LookupError(f"live notice {notice_id} is gone")
        return str(row[0])

    async def _feed_lost(self) -> None:
        """Tell every socket of this process that notices may have been missed."""
        channels = {channel for members in self.local.groups.values() for channel in members}
        for channel in channels:
            with contextlib.suppress(ChannelFull):
                await self.local.send(channel, dict(FEED_LOST))

    def _conninfo(self) -> str:
        params = dict(connections[self.database].get_connection_params())
        for name in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(name, None)
        # A database that does not answer refuses the handshake in seconds, not never.
        params.setdefault("connect_timeout", 5)
        return psycopg.conninfo.make_conninfo("", **params)
