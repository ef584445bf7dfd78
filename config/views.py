"""Error views Django calls itself (handler400 in config.urls)."""

from django.http import HttpRequest, HttpResponse
from django.views import defaults

from core.http import error_response


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A request Django refused before any view (a Host not in ALLOWED_HOSTS, another
    SuspiciousOperation): the API's error shape under /api/, the friendly page elsewhere."""
    # request.path, not get_host() or build_absolute_uri(): the Host is what was refused.
    if request.path.startswith("/api/"):
        return error_response(400, "bad_request", "The request was refused as malformed.")
    return defaults.bad_request(request, exception)
