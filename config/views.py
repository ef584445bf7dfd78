"""Error views Django calls itself (handler400 and handler500 in config.urls)."""

import logging
import sys

from django.db import InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse
from django.views import defaults

from config.middleware import DashboardDomainErrorMiddleware
from core.http import error_response

logger = logging.getLogger(__name__)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A request Django refused before any view (a Host not in ALLOWED_HOSTS, another
    SuspiciousOperation): the API's error shape under /api/, the friendly page elsewhere."""
    # request.path, not get_host() or build_absolute_uri(): the Host is what was refused.
    if request.path.startswith("/api/"):
        return error_response(400, "bad_request", "The request was refused as malformed.")
    return defaults.bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's last resort, for what no view-level handler caught: an exception in a
    middleware (the session middleware saving, or loading the user while the not-found page
    renders) or in an error page. A database outage is no bug of ours there either: the
    friendly 503 page (JSON 503 under /api/), as the views answer it. Called while the
    exception is being handled, so sys.exc_info() is that exception. (With DEBUG on, Django
    shows its technical page instead of calling this.)"""
    exception = sys.exc_info()[1]
    api = request.path.startswith("/api/")
    if isinstance(exception, OperationalError | InterfaceError):
        logger.warning("database unavailable: %s", exception)
        # Under ASGI Django renders error pages (the not-found page included) in a worker
        # thread, not the request's: its connection is never closed at the request's end, and
        # once broken it would fail every later page that thread renders, the database back
        # or not. Give it back now.
        for conn in connections.all(initialized_only=True):
            conn.close_if_unusable_or_obsolete()
        if not api:
            return DashboardDomainErrorMiddleware.unavailable()
        response = error_response(503, "unavailable", "The database is unavailable; retry shortly.")
        response["Retry-After"] = str(DashboardDomainErrorMiddleware.RETRY_AFTER_SECONDS)
        return response
    if api:
        return error_response(500, "internal_error", "Something went wrong on our side.")
    return defaults.server_error(request)
