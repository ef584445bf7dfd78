"""Template context every page gets from core."""

from typing import Any

from django.http import HttpRequest

from .realtime import feed_reaches_every_process


def live_feed(request: HttpRequest) -> dict[str, Any]:
    """`live_feed_partial`: true when this server's live pages cannot hear what other processes
    change (an in-memory channel layer): the Live indicator (templates/_live_status.html) then
    says so instead of claiming to be live."""
    return {"live_feed_partial": not feed_reaches_every_process()}
