"""The one ASGI entry point: `uvicorn config.asgi:application` serves everything on one URL.

- websockets: the channels stack (live pages);
- the handoff long-poll (`GET /api/v1/handoffs/{id}?wait=S`): config.longpoll waits for the
  handoff holding no thread (Django's ASGI handler keeps one per request), then Django answers;
- HTTP whose path matches settings.SWITCHBOARD_ASYNC_HTTP_PATHS (the session export's
  streaming, the handoff long-poll: requests that wait or stream and must hold no thread):
  Django's ASGI handler;
- every other HTTP request (the API, the dashboard's pages, static files, health, metrics):
  Django's WSGI handler, run on a pool of threads (SWITCHBOARD_WSGI_THREADS) by
  config.wsgi_bridge (a small body read and a plain response written by the loop, so the
  thread never waits for it; a2wsgi's hops for the rest). A
  request costs well under the server CPU it costs under Django's ASGI handler, which runs
  every sync view of a process on one shared thread (bench/ingest.py's CPU per request and its
  32-agent fleet show the difference).

In production the same split can be made by a reverse proxy instead: `/ws/` and the async paths
to this application, the rest to a WSGI server (README, "Production").
"""

import asyncio
import os
import re
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Django must be set up before anything imports models (the consumers do).
django_asgi_app = get_asgi_application()

from config.handlers import get_wsgi_application  # noqa: E402

django_wsgi_app = get_wsgi_application()

from asgiref.sync import SyncToAsync  # noqa: E402
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from config import shutdown  # noqa: E402
from config.longpoll import HandoffLongPoll  # noqa: E402
from config.routing import websocket_urlpatterns  # noqa: E402
from config.wsgi_bridge import BufferedWsgi  # noqa: E402
from core.domain_events import relays_after_response  # noqa: E402

Scope = dict[str, Any]

websocket_app = AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))


class _LoopAwareWsgi:
    """Django's WSGI handler, told which event loop serves this process.

    Sync code in a request (the after-commit broadcast of core.realtime) calls
    `async_to_sync(layer.group_send)`. In a thread of Django's ASGI handler asgiref runs that on
    the server's loop; in a plain thread it would start a new loop, and with it a new Redis
    connection, for every call (and the in-memory channel layer, which lives on the server's
    loop, would never deliver). Recording the server's loop for the thread, as asgiref's own
    SyncToAsync does, keeps the ASGI handler's behaviour.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pid = os.getpid()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        local = SyncToAsync.threadlocal
        local.main_event_loop = self.loop
        local.main_event_loop_pid = self.pid
        return self.app(environ, start_response)


class Dispatcher:
    """Route one ASGI connection: websocket, async HTTP, or HTTP through WSGI."""

    def __init__(self, async_paths: list[str], wsgi_threads: int) -> None:
        self.async_path = re.compile("|".join(f"(?:{p})" for p in async_paths) or r"(?!)")
        self.wsgi = _LoopAwareWsgi(django_wsgi_app)
        # A request's outbox relays run after its response has gone (core.domain_events).
        self.wsgi_app = BufferedWsgi(
            self.wsgi,
            workers=wsgi_threads,
            max_buffered_body=settings.SWITCHBOARD_MAX_BODY_BYTES,
            around=relays_after_response,
        )
        self.longpoll = HandoffLongPoll(django_asgi_app)  # type: ignore[arg-type]

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http":
            if self.longpoll.handles(scope):
                return await self.longpoll(scope, receive, send)
            if self.async_path.match(scope["path"]):
                return await django_asgi_app(scope, receive, send)  # type: ignore[arg-type]
            if self.wsgi.loop is None:
                self.wsgi.loop = asyncio.get_running_loop()
                self.wsgi.pid = os.getpid()
            return await self.wsgi_app(scope, receive, send)  # type: ignore[arg-type]
        if kind == "websocket":
            return await websocket_app(scope, receive, send)
        if kind == "lifespan":
            # Startup: watch the server's stop signals, so waiting long-polls end as soon as it
            # is asked to stop (config/shutdown.py). Shutdown: mark the stop (uvicorn sends it
            # after its grace period; the signal has marked it by then).
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    shutdown.watch_signals()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    shutdown.begin()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        raise ValueError(f"unknown ASGI scope type {kind!r}")


application = Dispatcher(settings.SWITCHBOARD_ASYNC_HTTP_PATHS, settings.SWITCHBOARD_WSGI_THREADS)
