"""The handoff long-poll's wait, held by a small ASGI app in front of Django (config/asgi.py).

`GET /api/v1/handoffs/{id}?wait=S` must hold no thread and no database connection while it
waits. Django's ASGI handler cannot wait without a thread: it gives every request its own
thread-sensitive executor (asgiref ThreadSensitiveContext), whose thread the request_started
signal's sync receivers (Django's own close_old_connections) create, and which lives until the
request ends, so N waiting agents kept N threads (bench/handoff_longpoll.py).

So the waiting happens here, and the answering stays with the ninja endpoint
(handoffs_app.api.read_handoff), which alone renders the handoff's JSON and every error:

1. A request this app cannot simply wait for (not a GET, `wait` absent, 0 or not one the
   endpoint takes: both read it with handoffs_app.waiting.parse_wait; a parameter besides
   `wait`, which the endpoint refuses; a bad or missing key, a key below the agent scope, a
   key over its rate limit, another project's or an unknown handoff, a handoff already
   resolved, the database or cache failing) goes to Django at once, unchanged: the endpoint
   answers it, in the one error shape.
2. Otherwise it waits on the handoff's channel-layer group (handoffs_app.waiting, the view's own
   wait), with the checks and reads run briefly on the event loop's small default executor
   (`thread_sensitive=False`) and the connection given back after each; meanwhile it watches
   `receive()` for http.disconnect: an agent that goes away ends the wait at once (its group
   entry is discarded), and nothing is answered.
3. Once the handoff is resolved, S seconds have passed or the server is stopping
   (config/shutdown.py: ended at once, not cancelled after the server's grace period), the
   request goes to Django with `wait` removed: the endpoint reads the row and answers, through
   the whole middleware stack (request id, rate-limit headers, security headers, the latency
   metric: which counts from the start of the wait, as it did when the view waited).

The rate limit is counted once, by the endpoint's throttle in step 3 (step 1 only peeks).
"""

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode
from uuid import UUID

from asgiref.sync import sync_to_async
from django.db import connection

from config import shutdown
from config.api import rate_bucket
from core import metrics, ratelimit
from core.scopes import DEFAULT_SCOPE, require_key_scope
from core.services.projects import authenticate_api_key
from handoffs_app.access import get_handoff_for_key
from handoffs_app.api import read_state
from handoffs_app.waiting import parse_wait, wait_for_resolution

logger = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

PATH = re.compile(r"^/api/v1/handoffs/(?P<id>[^/]+)$")
# Set on the scope handed to Django: when the request began, for RequestMetricsMiddleware.
STARTED_KEY = "switchboard.started"


def _wait_seconds(query_string: bytes) -> int | None:
    """The `wait` this app waits for (the last one given, as Django reads it, read by the
    endpoint's own parse_wait), or None: absent, 0, or one the endpoint refuses (422), as it
    refuses any other parameter (config.api.refuse_unknown_query_parameters)."""
    pairs = parse_qsl(query_string.decode("latin-1"), True)
    values = [v for k, v in pairs if k == "wait"]
    if not values or len(values) < len(pairs):
        return None
    try:
        return parse_wait(values[-1]) or None
    except ValueError:
        return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _bearer(scope: Scope) -> str | None:
    scheme, _, token = (_header(scope, b"authorization") or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _without_wait(query_string: bytes) -> bytes:
    pairs = parse_qsl(query_string.decode("latin-1"), True)
    return urlencode([(k, v) for k, v in pairs if k != "wait"]).encode("latin-1")


def _may_wait(token: str, handoff_id: UUID) -> Any:
    """The API key, when the endpoint would accept this request and the handoff is unresolved;
    else None (the endpoint answers it at once). Gives the connection back before returning."""
    try:
        api_key = authenticate_api_key(token)
        if api_key is None:
            return None
        require_key_scope(api_key, DEFAULT_SCOPE)
        bucket = rate_bucket(api_key)
        if bucket is not None:
            try:
                if ratelimit.peek(bucket.name, bucket.limit).count >= bucket.limit:
                    return None  # the endpoint's throttle counts it and answers 429
            except Exception:
                pass  # the throttle lets requests through while its store is down
        if get_handoff_for_key(api_key, handoff_id).is_resolved:
            return None
        return api_key
    except Exception:
        return None  # a 403/404/503 and the like: the endpoint renders it
    finally:
        if not connection.in_atomic_block:
            connection.close()


def _has_body(scope: Scope) -> bool:
    length = (_header(scope, b"content-length") or "0").strip()
    return length != "0" or _header(scope, b"transfer-encoding") is not None


def _disconnected(listener: "asyncio.Future[Message]") -> bool:
    return (
        listener.done()
        and not listener.cancelled()
        and listener.exception() is None
        and listener.result()["type"] == "http.disconnect"
    )


class HandoffLongPoll:
    """Wait for a handoff without a thread; let `answer` (Django's ASGI handler) answer."""

    def __init__(self, answer: App) -> None:
        self.answer = answer

    def handles(self, scope: Scope) -> bool:
        return bool(PATH.match(scope["path"]))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope = {**scope, STARTED_KEY: time.perf_counter()}
        match = PATH.match(scope["path"])
        seconds = _wait_seconds(scope.get("query_string", b""))
        token = _bearer(scope)
        try:
            handoff_id = UUID(match["id"]) if match else None
        except ValueError:
            handoff_id = None
        if (
            scope["method"] != "GET"
            or _has_body(scope)
            or seconds is None
            or token is None
            or handoff_id is None
        ):
            return await self.answer(scope, receive, send)

        # The request's (empty) body, kept to hand to Django after the wait.
        body: list[Message] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body.append(message)
            if not message.get("more_body", False):
                break
        # From here on, the next message can only be the agent's disconnect.
        listener: asyncio.Future[Message] = asyncio.ensure_future(receive())

        async def replay() -> Message:
            if body:
                return body.pop(0)
            return await listener

        waiter: asyncio.Future[dict[str, Any]] | None = None
        stopping: asyncio.Future[None] | None = None
        try:
            api_key = await sync_to_async(_may_wait, thread_sensitive=False)(token, handoff_id)
            if api_key is None:
                # Unchanged: the endpoint answers at once (an error, a resolved handoff).
                if not _disconnected(listener):
                    await self.answer(scope, replay, send)
                return
            read_one = sync_to_async(read_state, thread_sensitive=False)
            resolved = [False]

            async def read() -> tuple[dict[str, Any], bool]:
                state = await read_one(api_key, handoff_id)
                resolved[0] = state[1]
                return state

            waiter = asyncio.ensure_future(
                wait_for_resolution(handoff_id, timeout=seconds, read=read)
            )
            # The server stopping ends the wait too (config/shutdown.py): the agent gets the
            # current state, as at the timeout, before the server would cancel the request.
            shutdown.watch_signals()
            stopping = asyncio.ensure_future(shutdown.wait())
            metrics.HANDOFF_LONGPOLLS_WAITING.inc()
            try:
                await asyncio.wait(
                    {listener, waiter, stopping}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                metrics.HANDOFF_LONGPOLLS_WAITING.dec()
            if _disconnected(listener):
                metrics.HANDOFF_LONGPOLLS_ENDED.labels("disconnected").inc()
                return
            if waiter.done() and waiter.exception() is not None:
                logger.warning("handoff long-poll wait failed: %s", waiter.exception())
            if resolved[0]:
                how = "resolved"
            elif waiter.done():
                how = "timeout"
            else:
                how = "shutdown"
            metrics.HANDOFF_LONGPOLLS_ENDED.labels(how).inc()
            query = _without_wait(scope.get("query_string", b""))
            await self.answer({**scope, "query_string": query}, replay, send)
        finally:
            if stopping is not None and not stopping.done():
                stopping.cancel()
            if waiter is not None and not waiter.done():
                waiter.cancel()  # its `finally` leaves the channel-layer group
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
            if not listener.done():
                listener.cancel()
