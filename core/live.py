"""The base of every live (websocket) consumer of the dashboard.

Consumers authenticate from scope["user"] (the session cookie, via AuthMiddlewareStack), check
access with the same helpers as the views, join the groups of core.realtime, and render the
group events the services publish after commit as htmx out-of-band swaps. Clients only listen.
"""

import asyncio
import contextlib
import logging
from typing import Any

from channels.consumer import get_handler_name
from channels.db import aclose_old_connections, database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from redis.exceptions import RedisError

from core import metrics
from core.errors import DomainError
from core.outage import OutageLog
from core.realtime import project_list_group

logger = logging.getLogger(__name__)

# Close codes before accept (the handshake is refused; the htmx extension retries later).
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_BAD_REQUEST = 4400
# The channel layer (Redis) is unreachable: "try again later" (RFC 6455, 1013).
CLOSE_TRY_AGAIN_LATER = 1013

# With Redis down every socket fails the same way (joining its groups, or the layer's receive
# loop): one warning for the outage, not an ERROR traceback per socket, and the handshake refused
# (the page's htmx extension retries; the page itself still renders, without live updates).
_layer_outage = OutageLog(logger, "channel layer (live pages' websockets)")
LAYER_ERRORS = (RedisError, OSError)


# Splits one rendered frame into several websocket messages. htmx parses each message as one
# fragment, and the HTML parser cannot hold a top-level <tr> and a <tbody> in one fragment (after
# a <tr> it drops the <tbody> tag and its rows land at the top level, where they are swapped by
# id, find no target and vanish): a template puts this between the two kinds.
FRAME_BREAK = "<!-- frame -->"


class AccessLost(Exception):
    """The user can no longer see what this socket shows (membership removed, object gone)."""


class LiveConsumer(AsyncWebsocketConsumer):
    """Base: joins groups after the access check, ignores messages it has no use for."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except LAYER_ERRORS as exc:
            _layer_outage.failed(exc)
            self._uncount()
            # Refuses the handshake, or closes an accepted socket; the client may be gone.
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER})
            return
        _layer_outage.succeeded()

    async def websocket_connect(self, message: dict[str, Any]) -> None:
        self.joined: list[str] = []
        self.counted = False
        await super().websocket_connect(message)

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        await super().accept(subprotocol, headers)
        if not self.counted:
            self.counted = True
            metrics.WEBSOCKETS.inc()

    async def dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type", "")
        if (
            not kind.startswith("websocket.")
            and getattr(self, get_handler_name(message), None) is None
        ):
            # Another app's event on a shared group (the project group carries task events
            # too): not ours to render, and no reason to drop the connection.
            await aclose_old_connections()
            await self.other_event(message)
            return
        await super().dispatch(message)

    async def other_event(self, message: dict[str, Any]) -> None:
        return None

    async def live_feed_lost(self, message: dict[str, Any]) -> None:
        """This process stopped hearing other processes' notices (core.notify_layer lost its
        listening connection): close as "try again later", so the page says it is
        reconnecting instead of showing a live feed that misses changes."""
        await self.close(code=CLOSE_TRY_AGAIN_LATER)

    async def join(self, groups: list[str]) -> None:
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.append(group)

    def _uncount(self) -> None:
        if getattr(self, "counted", False):
            self.counted = False
            metrics.WEBSOCKETS.dec()

    async def disconnect(self, code: int) -> None:
        self._uncount()
        try:
            for group in getattr(self, "joined", []):
                await self.channel_layer.group_discard(group, self.channel_name)
        except LAYER_ERRORS as exc:  # its membership expires in the layer by itself
            _layer_outage.failed(exc)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        return None  # read-only: actions go through the views and the services

    async def send_frame(self, frame: str | None) -> None:
        for part in (frame or "").split(FRAME_BREAK):
            if not part.strip():
                continue
            try:
                await self.send(text_data=part)
            except OSError:
                # The client went away (uvicorn's ClientDisconnected, an OSError) while a
                # delayed flush rendered: nothing to deliver, and no traceback on shutdown.
                return

    async def run(self, function: Any, *args: Any) -> Any:
        """Run a stream method (ORM + templates) in the ORM's thread; close on lost access."""
        try:
            return await database_sync_to_async(function)(*args)
        except (AccessLost, DomainError):
            await self.close(code=CLOSE_NOT_FOUND)
            return None

    def user(self) -> Any:
        user = self.scope.get("user")
        return user if user is not None and user.is_authenticated else None


class LiveListConsumer(LiveConsumer):
    """Base of a live list (sessions, tasks, later handoffs): one group per list of a project.

    Changes are noted as they arrive and rendered together once `flush_seconds` after the first
    of them: one query per flush, however many changes arrive meanwhile. Subclasses set
    `listing` (the group: core.realtime.project_list_group), `id_field` (the id an event
    carries), `open_stream` (a sync callable (user, project_id, query) -> stream) and map their
    event types to `changed`. The stream has `note(type, id) -> bool` (whether to render),
    `take() -> (changed ids, created ids)` and `flush(changed, created) -> frame`.
    """

    listing: str = ""
    id_field: str = ""
    flush_seconds: float = 0.5
    # A change committed between the page's render and this socket's join reached no one. A
    # list whose flush renders it whole (the handoff queue, the navigation's count) renders
    # once on joining; lists that render only the noted rows cannot, and leave this False.
    flush_on_join: bool = False

    def open_stream(self, user: Any, project_id: int, query: str) -> Any:
        raise NotImplementedError

    async def connect(self) -> None:
        self.flush_task: asyncio.Task[None] | None = None
        user = self.user()
        if user is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        project_id = int(self.scope["url_route"]["kwargs"]["project_id"])
        query = self.scope.get("query_string", b"").decode("latin-1")
        try:
            self.stream = await database_sync_to_async(self.open_stream)(user, project_id, query)
        except DomainError:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        except ValueError:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        await self.join([project_list_group(project_id, self.listing)])
        await self.accept()
        # A stream that noted, on opening, what changed since its page's render (`caught_up`)
        # flushes it as any change.
        if self.flush_on_join or getattr(self.stream, "caught_up", False):
            self.flush_task = asyncio.create_task(self._flush_later())

    async def changed(self, event: dict[str, Any]) -> None:
        noted = self.stream.note(str(event.get("type", "")), str(event.get(self.id_field, "")))
        if noted and (self.flush_task is None or self.flush_task.done()):
            self.flush_task = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.flush_seconds)
        changed, created = self.stream.take()
        self.flush_task = None  # changes noted while this renders get a flush of their own
        await self.send_frame(await self.run(self.stream.flush, changed, created))

    async def disconnect(self, code: int) -> None:
        task = getattr(self, "flush_task", None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await super().disconnect(code)
