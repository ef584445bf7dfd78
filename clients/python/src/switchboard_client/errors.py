"""Typed exceptions: the API's one error shape, `{"error": {"code", "message", "detail"}}`, as a
class per status, carrying the code, message and detail the server sent."""

from __future__ import annotations

from typing import Any


class SwitchboardError(Exception):
    """Any failure of a call. `status` is the HTTP status (None when no response came),
    `code` the API's error code (`head_seq_mismatch`, `rate_limited`, ...), `detail` its
    detail (a dict, or the list of validation errors of a 422)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "error",
        detail: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.detail = detail if detail is not None else {}
        # Seconds the server asked to wait (Retry-After), when it said.
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f"{self.status} " if self.status is not None else ""
        return f"{where}{self.code}: {self.message}"


class ConfigurationError(SwitchboardError):
    """No URL or API key given and none in SWITCHBOARD_URL / SWITCHBOARD_API_KEY."""


class NetworkError(SwitchboardError):
    """No answer: the connection failed or broke (after the retries allowed), or a request
    that may have been processed broke mid-way and was not safe to repeat. The httpx error is
    the __cause__."""


class ResponseError(SwitchboardError):
    """A response the client cannot read as the API's: not JSON, or missing a field."""


class BadRequest(SwitchboardError):
    """400."""


class Unauthorized(SwitchboardError):
    """401: a missing, unknown, revoked or expired API key."""


class Forbidden(SwitchboardError):
    """403: the key's scope is too low (detail: required_scope, scope)."""


class NotFound(SwitchboardError):
    """404: no such object in the key's project."""


class Conflict(SwitchboardError):
    """409: refused in the object's current state; `code` says why (head_seq_mismatch,
    invalid_transition, session_not_writable, handoff_already_open, idempotency_key_reused,
    external_id_taken, session_has_forks, legal_hold, ...)."""


class Gone(SwitchboardError):
    """410: what was asked for was compacted or deleted."""


class PayloadTooLarge(SwitchboardError):
    """413: the body or an event's content is over the server's limit."""


class InvalidInput(SwitchboardError):
    """422: the request did not validate; `detail` lists the problems (type, loc, msg)."""


class RateLimited(SwitchboardError):
    """429, after the retries allowed: the key's rate limit (rate_limited) or the project's
    concurrent exports (export_busy). `retry_after` is the server's Retry-After."""


class Unavailable(SwitchboardError):
    """503, after the retries allowed: the server or its database is unavailable."""


_BY_STATUS: dict[int, type[SwitchboardError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: PayloadTooLarge,
    422: InvalidInput,
    429: RateLimited,
    503: Unavailable,
}


def error_class(status: int) -> type[SwitchboardError]:
    return _BY_STATUS.get(status, SwitchboardError)
