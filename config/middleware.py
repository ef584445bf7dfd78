import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from core import logging as request_logging
from core import metrics
from core.http import error_response


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
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        route = match.route if match is not None and match.route else "<unmatched>"
        metrics.REQUEST_SECONDS.labels(route, request.method, str(response.status_code)).observe(
            time.perf_counter() - started
        )
        return response


class ApiBodyLimitMiddleware:
    """API requests: refuse oversize bodies by their Content-Length before anything reads or
    parses them, and answer unknown paths and wrong methods in the JSON error shape."""

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            limit = settings.SWITCHBOARD_MAX_BODY_BYTES
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


class DashboardDomainErrorMiddleware:
    """Render a domain error raised by a dashboard view as a friendly page (or htmx fragment).

    The API renders the same errors as JSON in config/api.py; this is the dashboard's one place.
    """

    TITLES = {
        403: "Not allowed",
        404: "Not found",
        409: "That cannot be done now",
        413: "Too large",
        422: "Check your input",
        400: "Check your input",
    }
    HINTS = {
        403: "Your role in this project does not allow this. An admin can change your role.",
        404: "It may have been deleted, or it belongs to a project you are not a member of.",
        409: "Someone or something changed it meanwhile. Reload the page to see its state.",
    }

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        from django.shortcuts import render

        from core.errors import DomainError

        if not isinstance(exception, DomainError) or request.path.startswith("/api/"):
            return None
        status = exception.status
        context = {
            "title": self.TITLES.get(status, "Something is not right"),
            "message": exception.message,
            "hint": self.HINTS.get(status, "Check what you entered and try again."),
            "status": status,
        }
        if getattr(request, "htmx", False):
            return render(request, "errors/_inline_error.html", context, status=status)
        return render(request, "errors/domain_error.html", context, status=status)
