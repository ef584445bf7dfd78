"""Django's WSGI handler, with the agent API's requests served through a shorter middleware stack.

An agent's request is authenticated by its API key (bearer), answered in JSON, and never
touches what half of settings.MIDDLEWARE is there for: static files, the signed-in person's
session, CSRF, messages, htmx, the dashboard's error pages. Each of those layers still costs a
call in and out of every request, and the stack took about a third of a single-event append's
CPU in the Django process (bench/request_cpu.py --profile append). So a path under /api/ (but
the API's HTML docs page) goes to a second handler built without
settings.SWITCHBOARD_DASHBOARD_ONLY_MIDDLEWARE; everything else, and everything that sets a
header, is the same on both (tests/core/test_api_handler.py compares the answers' headers).

The Django test client builds its own handler from settings.MIDDLEWARE: the tests that go
through it see the whole stack on the API too, which these layers let through unchanged.
"""

from collections.abc import Callable, Iterable
from typing import Any

import django
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler

API_PREFIX = "/api/"
# The API's Swagger page is HTML for a browser: the dashboard's stack (it needs none of it
# today, but a page is what that stack is for).
API_HTML_PREFIXES = ("/api/v1/docs",)


def api_middleware() -> list[str]:
    """settings.MIDDLEWARE without the layers only the dashboard needs, in the same order."""
    dashboard_only = set(settings.SWITCHBOARD_DASHBOARD_ONLY_MIDDLEWARE)
    return [path for path in settings.MIDDLEWARE if path not in dashboard_only]


class ApiWSGIHandler(WSGIHandler):
    """Django's WSGI handler with api_middleware() as its stack."""

    def load_middleware(self, is_async: bool = False) -> None:
        # BaseHandler reads its list from settings.MIDDLEWARE; it is given the API's for the
        # time of this call, once, when the process builds its handlers (nothing else reads
        # settings then).
        self.middleware = api_middleware()
        whole = settings.MIDDLEWARE
        settings.MIDDLEWARE = self.middleware
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = whole


def is_api_path(path: str) -> bool:
    return path.startswith(API_PREFIX) and not path.startswith(API_HTML_PREFIXES)


class PathSplitHandler:
    """A WSGI application: API paths to `api`, the rest to `whole`."""

    def __init__(self) -> None:
        self.whole = WSGIHandler()
        self.api = ApiWSGIHandler()

    def handler_for(self, path: str) -> WSGIHandler:
        return self.api if is_api_path(path) else self.whole

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        return self.handler_for(environ.get("PATH_INFO", ""))(environ, start_response)


def get_wsgi_application() -> PathSplitHandler:
    """As django.core.wsgi.get_wsgi_application: Django set up, then the application."""
    django.setup(set_prefix=False)
    return PathSplitHandler()
