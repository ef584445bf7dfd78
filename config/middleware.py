import json

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def error_response(status: int, code: str, message: str, detail: object = None) -> HttpResponse:
    body = {"error": {"code": code, "message": message, "detail": detail or {}}}
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")


class ApiBodyLimitMiddleware:
    """Refuse oversize API bodies by their Content-Length, before anything reads or parses them."""

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
                    413, "payload_too_large",
                    f"The request body is {length} bytes; the limit is {limit}.",
                    {"limit": limit, "size": length},
                )
        return self.get_response(request)
