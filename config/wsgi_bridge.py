"""A WSGI application served from an ASGI server with one thread hop each way.

a2wsgi's WSGIMiddleware runs the application on a thread pool and hands every piece of the
exchange back to the event loop with a blocking cross-thread call: each read of the request
body, the response start, each body chunk and the closing empty chunk (four blocking hops for
a small POST, each waiting until the loop is free: behind the after-commit broadcast it has just
been given, say). Here a request body up to `max_buffered_body` bytes is read on the loop before
the thread starts, and a response that does not stream (Django's HttpResponse, not a
StreamingHttpResponse or FileResponse) is collected in the thread and handed to the loop whole,
without waiting: the thread never waits for the loop, and the client has its answer while the
thread closes the response. Larger bodies are read, and streaming
responses sent, through a2wsgi's hops as before (the thread holds them for as long as they
stream, as it did).

Everything that happens in the thread happens there as before: the application is called,
its response iterated and closed (Django's request_finished, which returns the thread's
database connection, runs in the thread that served the request).
"""

import asyncio
import concurrent.futures
import contextvars
import functools
import io
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from a2wsgi.wsgi import Body, build_environ

Scope = dict[str, Any]
Message = dict[str, Any]
Headers = list[tuple[bytes, bytes]]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Exchange:
    """One request's response, as the thread saw it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, send: Any) -> None:
        self.loop = loop
        self.send = send
        self.status = 500
        self.headers: Headers = []
        self.streamed = False  # True once a2wsgi-style hops have sent the start

    def start_response(
        self, status: str, response_headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        self.status = int(status.split(" ", 1)[0])
        self.headers = [
            (name.strip().encode("latin1").lower(), value.strip().encode("latin1"))
            for name, value in response_headers
        ]
        return self._write

    def _hop(self, message: Message) -> None:
        """Send `message` from the thread: wait for the loop to write it (streaming only)."""
        asyncio.run_coroutine_threadsafe(self.send(message), self.loop).result()

    def _start_streaming(self) -> None:
        if not self.streamed:
            self.streamed = True
            self._hop(
                {"type": "http.response.start", "status": self.status, "headers": self.headers}
            )

    def _write(self, chunk: bytes) -> None:
        # WSGI's legacy write() callable (Django never uses it): stream from here on.
        self._start_streaming()
        self._hop({"type": "http.response.body", "body": chunk, "more_body": True})

    async def _send_whole(self, body: bytes) -> None:
        await self.send(
            {"type": "http.response.start", "status": self.status, "headers": self.headers}
        )
        await self.send({"type": "http.response.body", "body": body, "more_body": False})

    def run(self, app: WsgiApp, environ: dict[str, Any]) -> concurrent.futures.Future[None] | None:
        """In the thread: a response that does not stream is handed to the loop whole, without
        waiting for it to be written (the future says when it is), before the response is
        closed (Django's request_finished: the client need not wait for it); a streaming one is
        sent from here, chunk by chunk (None)."""
        iterable = app(environ, self.start_response)
        try:
            if getattr(iterable, "streaming", True) is False or isinstance(iterable, list):
                body = b"".join(iterable)
                if not self.streamed:
                    return asyncio.run_coroutine_threadsafe(self._send_whole(body), self.loop)
                self._hop({"type": "http.response.body", "body": body, "more_body": True})
            else:
                for chunk in iterable:
                    self._start_streaming()
                    self._hop({"type": "http.response.body", "body": chunk, "more_body": True})
                self._start_streaming()
            self._hop({"type": "http.response.body", "body": b"", "more_body": False})
            return None
        finally:
            close = getattr(iterable, "close", None)
            if close is not None:
                close()


class BufferedWsgi:
    """ASGI application serving `app` (WSGI) on `workers` threads."""

    def __init__(
        self,
        app: WsgiApp,
        *,
        workers: int,
        max_buffered_body: int,
        around: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        """`around()`: a context each request's work in its thread runs in, from the call of
        the application to the close of its response (after the response was handed over)."""
        self.app = app
        self.around = around
        self.max_buffered_body = max_buffered_body
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="WSGI")

    async def _read_body(self, scope: Scope, receive: Any) -> Any:
        """The request body as a file: read here when its declared size is small enough, else
        a2wsgi's Body, which the thread reads through the loop."""
        length = None
        chunked = False
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = None
            elif name == b"transfer-encoding":
                chunked = True
        if chunked or length is None or length > self.max_buffered_body:
            if length is None and not chunked:
                return io.BytesIO()  # no body declared (a GET): nothing to wait for
            return Body(asyncio.get_running_loop(), receive)
        parts = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            parts.append(message.get("body", b""))
            more = message.get("more_body", False)
        return io.BytesIO(b"".join(parts))

    def _run(self, exchange: _Exchange, environ: dict[str, Any]) -> Any:
        with self.around():
            return exchange.run(self.app, environ)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        loop = asyncio.get_running_loop()
        body = await self._read_body(scope, receive)
        environ = build_environ(scope, body)  # type: ignore[arg-type]
        environ["wsgi.errors"] = sys.stderr
        exchange = _Exchange(loop, send)
        run = functools.partial(contextvars.copy_context().run, self._run, exchange, environ)
        sent = await loop.run_in_executor(self.executor, run)
        if sent is not None:
            await asyncio.wrap_future(sent)  # written by the loop (streamed: from the thread)
