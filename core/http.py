"""JSON responses shared by every app's API endpoints and the middleware."""

import json
from typing import Any

from django.http import HttpResponse


def error_response(status: int, code: str, message: str, detail: object = None) -> HttpResponse:
    body = {"error": {"code": code, "message": message, "detail": detail or {}}}
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")


def json_response(payload: Any, status: int = 200) -> HttpResponse:
    """Compact JSON; Decimals, UUIDs and datetimes already arrive as strings or go through str."""
    return HttpResponse(
        json.dumps(payload, default=str, separators=(",", ":")),
        status=status,
        content_type="application/json",
    )
