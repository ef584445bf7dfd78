"""The WSGI entry point for a separate WSGI server in production (README, "Production"):
plain HTTP only; websockets and settings.SWITCHBOARD_ASYNC_HTTP_PATHS go to config.asgi."""

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from config.handlers import get_wsgi_application  # noqa: E402  (after the settings module is set)

django_application = get_wsgi_application()

from core.domain_events import relays_after_response  # noqa: E402  (Django is set up above)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _ClosedAfter:
    """A response's body that ends `context` when the server closes it."""

    def __init__(self, body: Iterable[bytes], context: AbstractContextManager[Any]) -> None:
        self.body = body
        self.context = context

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()  # Django's: request_finished (the request's connections go back)
        finally:
            self.context.__exit__(None, None, None)


class AfterResponse:
    """Run each request inside `around()` until the server closes its response.

    A WSGI server closes a response once it has written it (PEP 3333: granian and gunicorn
    write the body, then call `close()`, in the thread that called the application), so the
    live notices and outbox relays that `relays_after_response` holds back go out after the
    client has its answer: a fork answers without waiting for its relay's three round trips,
    an append without its PUBLISH. config.wsgi_bridge does the same for the ASGI entry point.
    Django itself counts on the same thread: its close() gives back that thread's connections.
    """

    def __init__(self, app: WsgiApp, around: Callable[[], AbstractContextManager[Any]]) -> None:
        self.app = app
        self.around = around

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        context = self.around()
        context.__enter__()
        try:
            body = self.app(environ, start_response)
        except BaseException:
            context.__exit__(*sys.exc_info())
            raise
        return _ClosedAfter(body, context)


application = AfterResponse(django_application, relays_after_response)
