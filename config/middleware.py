import logging
import re
import sys
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.db import DataError
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware import csp
from django.views import defaults

from core import logging as request_logging
from core import metrics
from core.http import error_response
from core.ratelimit import Window


class RateLimitHeadersMiddleware:
    """Every counted API response says where its caller stands: RateLimit-Limit, -Remaining and
    -Reset (the window the API throttle in config/api.py left on the request)."""

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        window = getattr(request, "rate_limit", None)
        if isinstance(window, Window):
            for name, value in window.headers().items():
                response[name] = value
        return response


logger = logging.getLogger(__name__)


class RequestIdMiddleware:
    """Give every request an id: the client's X-Request-ID when it is sane, else a new one.

    Set on the response's X-Request-ID and, for the request's duration, in the contextvar that
    core.logging's filter copies onto every log record. First in MIDDLEWARE, so it covers all.
    """

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rid = request_logging.accept_or_make(request.headers.get("X-Request-ID"))
        request.request_id = rid  # type: ignore[attr-defined]
        token = request_logging.request_id.set(rid)
        try:
            response = self.get_response(request)
        finally:
            request_logging.request_id.reset(token)
        response["X-Request-ID"] = rid
        return response


class RequestMetricsMiddleware:
    """Request latency by route: the URL pattern (`api/v1/sessions/<session_id>`), never
    the raw path, so the label's values are as many as the routes."""

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # A handoff long-poll's wait happened before Django saw it (config/longpoll.py): count
        # from when it began, as for any other request.
        scope = getattr(request, "scope", None) or {}
        started = scope.get("switchboard.started") or time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        route = match.route if match is not None and match.route else "<unmatched>"
        metrics.REQUEST_SECONDS.labels(route, request.method, str(response.status_code)).observe(
            time.perf_counter() - started
        )
        return response


ARTIFACT_UPLOAD = re.compile(r"/api/v1/sessions/[^/]+/artifacts/[^/]+")


# Bytes read at a time from an upload's unread rest (ApiBodyLimitMiddleware).
UPLOAD_DRAIN_CHUNK = 64 * 1024


class ApiBodyLimitMiddleware:
    """API requests: refuse oversize bodies by their Content-Length before anything reads or
    parses them, and answer unknown paths and wrong methods in the JSON error shape."""

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            upload = request.method == "PUT" and ARTIFACT_UPLOAD.fullmatch(request.path)
            # An upload is a file streamed to storage, never parsed: sessions_app.services
            # .artifacts checks its Content-Length against its own limit before reading a byte.
            limit = sys.maxsize if upload else settings.SWITCHBOARD_MAX_BODY_BYTES
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return error_response(400, "bad_request", "Content-Length is not a number.")
            if length > limit:
                return error_response(
                    413,
                    "payload_too_large",
                    f"The request body is {length} bytes; the limit is {limit}.",
                    {"limit": limit, "size": length},
                )
            response = self.get_response(request)
            if upload and response.status_code >= 400:
                self.finish_reading_upload(request, length)
            # Django's router and ninja's method dispatch answer unknown paths (404) and wrong
            # methods (405) in HTML or plain text; agents get the API's one error shape.
            if response.status_code in (404, 405) and not response.get(
                "Content-Type", ""
            ).startswith("application/json"):
                if response.status_code == 404:
                    return error_response(404, "not_found", "No such API endpoint.")
                allowed = response.get("Allow", "")
                replacement = error_response(
                    405, "method_not_allowed", f"Use one of: {allowed}.", {"allowed": allowed}
                )
                replacement["Allow"] = allowed
                return replacement
            return response
        return self.get_response(request)

    @staticmethod
    def finish_reading_upload(request: HttpRequest, length: int) -> None:
        """An artifact upload refused before its body was read through (a session gone, a
        quota, a conflict): read the rest and drop it, so the client, still sending, reads the
        answer. A server that answers and closes over unread bytes resets the connection, and
        the client sees "server disconnected" instead of the 404. A body over the artifact
        limit (refused by its Content-Length before a byte was read) is left unread: reading
        it would cost more than the reset (and PEP 3333 leaves the connection to the server)."""
        if length > settings.SWITCHBOARD_ARTIFACT_MAX_BYTES:
            return
        try:
            while request.read(UPLOAD_DRAIN_CHUNK):
                pass
        except OSError:  # the client went away meanwhile: nothing to answer
            return


class DashboardDomainErrorMiddleware:
    """Render a domain error raised by a dashboard view as a friendly page (or htmx fragment).

    The API renders the same errors as JSON in config/api.py; this is the dashboard's one place.
    A database that cannot be reached (stopped, restarting, out of connections) is no bug of
    ours: a 503 page that says so, and asks to retry, rather than the 500 page.
    """

    TITLES = {
        403: "Not allowed",
        503: "Switchboard is temporarily unavailable",
        404: "Not found",
        410: "Erased",
        409: "That cannot be done now",
        413: "Too large",
        422: "Check your input",
        429: "Busy: try again shortly",
        400: "Check your input",
    }
    HINTS = {
        403: "Your role in this project does not allow this. An admin can change your role.",
        404: "It may have been deleted, or it belongs to a project you are not a member of.",
        410: "It was erased on a data-protection request. The receipt of the erasure (named "
        "above) is kept: an admin finds it on the project's Erasure page.",
        409: "Someone or something changed it meanwhile. Reload the page to see its state.",
        429: "Too many of these are running at once in this project. Retry in a few seconds.",
        503: "Nothing was lost. Reload the page in a few seconds.",
    }
    UNAVAILABLE = "Switchboard is temporarily unavailable: its database cannot be reached."
    RETRY_AFTER_SECONDS = 5

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        from django.db import InterfaceError, OperationalError
        from django.shortcuts import render

        from core.errors import DomainError, InvalidInput

        if request.path.startswith("/api/"):
            return None
        if isinstance(exception, DataError | UnicodeEncodeError):
            # A value the forms let through and the database refused: the visitor's input, so
            # a 400 page in our words; the database's (SQL, table names) go to the log.
            logger.info("value refused by the database: %s", exception)
            exception = InvalidInput(
                "A value you entered cannot be stored (a number out of range, or text holding "
                "a NUL character)."
            )
            exception.status = 400
        if isinstance(exception, DomainError):
            status, message = exception.status, exception.message
        elif isinstance(exception, (OperationalError, InterfaceError)):
            logger.warning("database unavailable: %s", exception)
            status, message = 503, self.UNAVAILABLE
        else:
            return None
        context = {
            "title": self.TITLES.get(status, "Something is not right"),
            "message": message,
            "hint": self.HINTS.get(status, "Check what you entered and try again."),
            "status": status,
        }
        template = (
            "errors/_inline_error.html"
            if getattr(request, "htmx", False)
            else "errors/domain_error.html"
        )
        if status != 503:
            response = render(request, template, context, status=status)
            retry_after = getattr(exception, "retry_after", None)
            if retry_after is not None:
                response["Retry-After"] = str(retry_after)
            return response
        return self.unavailable(template, context)

    @classmethod
    def unavailable(
        cls, template: str = "errors/domain_error.html", context: dict[str, object] | None = None
    ) -> HttpResponse:
        """The friendly 503 page of a database outage, with Retry-After."""
        from django.template.loader import render_to_string

        context = context or {
            "title": cls.TITLES[503],
            "message": cls.UNAVAILABLE,
            "hint": cls.HINTS[503],
            "status": 503,
        }
        # Without the request: its context processors read the signed-in user, from the database.
        response = HttpResponse(render_to_string(template, context), status=503)
        response["Retry-After"] = str(cls.RETRY_AFTER_SECONDS)
        return response


class ContentSecurityPolicyMiddleware(csp.ContentSecurityPolicyMiddleware):
    """Django's CSP middleware (settings.SECURE_CSP), with this request's own websocket origin
    (ws:// or wss:// and the host) added to connect-src.

    CSP Level 3 lets 'self' match ws: and wss: on the page's own host, and current browsers
    follow it; older ones (Safari before 15.4) do not, and the dashboard's live updates would be
    refused there. The host is the one ALLOWED_HOSTS accepted. A view that sets its own policy
    (django.views.decorators.csp) keeps it untouched.
    """

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        config = settings.SECURE_CSP
        if config and "connect-src" in config and not hasattr(response, "_csp_config"):
            try:
                host = request.get_host()
            except DisallowedHost:
                host = ""
            if host:
                origin = f"{'wss' if request.is_secure() else 'ws'}://{host}"
                connect = [*config["connect-src"], origin]
                response._csp_config = {**config, "connect-src": connect}  # type: ignore[attr-defined]
        return super().process_response(request, response)  # type: ignore[no-any-return]


class PermissionsPolicyMiddleware:
    """Send settings.PERMISSIONS_POLICY ({feature: [allowed origins]}) as the Permissions-Policy
    header on every response: an empty list turns the feature off for the page and its frames.

    Eight lines instead of django-permissions-policy: the policy is one fixed string, built once.
    """

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response
        self.header = ", ".join(
            f"{feature}=({' '.join(origins)})"
            for feature, origins in settings.PERMISSIONS_POLICY.items()
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.header and "Permissions-Policy" not in response:
            response["Permissions-Policy"] = self.header
        return response


class FriendlyNotFoundMiddleware:
    """With DEBUG on, Django answers an unknown URL (or a view's Http404) with its technical page,
    which lists every URL pattern: replace it with the friendly 404 page DEBUG off shows. Placed
    before CommonMiddleware, so APPEND_SLASH's redirect on a 404 still happens first."""

    TECHNICAL_MARKER = b"<code>DEBUG = True</code>"

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and not response.streaming
            and response.get("Content-Type", "").startswith("text/html")
            and self.TECHNICAL_MARKER in response.content
        ):
            return defaults.page_not_found(request, Http404())
        return response
