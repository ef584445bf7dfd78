"""Domain errors. Services raise these; the API and the dashboard each render them in one place.

Each carries a stable `code`, an HTTP `status` and a JSON-safe `detail`, so services never know
about HTTP and clients can branch on the code.
"""

from typing import Any


class DomainError(Exception):
    status = 400
    code = "bad_request"
    # Seconds after which retrying may succeed: sent as Retry-After when set (429, 503).
    retry_after: int | None = None

    def __init__(self, message: str, *, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail if detail is not None else {}


class NotFound(DomainError):
    status = 404
    code = "not_found"


class PermissionDeniedError(DomainError):
    status = 403
    code = "forbidden"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class InvalidTransition(Conflict):
    code = "invalid_transition"


class InvalidInput(DomainError):
    status = 422
    code = "invalid_input"


class PayloadTooLarge(DomainError):
    status = 413
    code = "payload_too_large"


class StoredValueTooDeep(Conflict):
    """A value stored before nesting was bounded is too deep for the readers (core.text): the
    read answers this, in the one error shape, instead of failing with a RecursionError."""

    code = "stored_value_too_deep"
