"""Keyset cursors: one codec for every list (sessions, tasks, history, later handoffs).

A cursor is the (sort value, id) of the last row shown, and optionally the name of the order it
was issued for, base64-encoded JSON: opaque to clients, checked on the way back in. A forged or
foreign cursor is refused with a 422, never passed on to the database.
"""

import base64
import binascii
import json
import uuid
from datetime import datetime

from .errors import InvalidInput


def encode_cursor(value: datetime, object_id: object, order: str | None = None) -> str:
    """A cursor after the row (value, object_id) of a list in `order` (None: the default)."""
    parts = [value.isoformat(), str(object_id)]
    if order is not None:
        parts.append(order)
    raw = json.dumps(parts).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, order: str | None = None) -> tuple[datetime, str]:
    """(value, id) of a cursor issued for `order`; InvalidInput for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        decoded = json.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(decoded, list) or len(decoded) not in (2, 3):
            raise ValueError
        issued_for = decoded[2] if len(decoded) == 3 else None
        # Both parts are compared in SQL: a forged id must fail here, not in the database.
        value = datetime.fromisoformat(decoded[0])
        object_id = str(uuid.UUID(str(decoded[1])))
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
        raise InvalidInput("The cursor is not one this server issued.") from None
    if issued_for != order:
        raise InvalidInput(
            "The cursor belongs to another sort order; start again from the first page.",
            detail={"sort": order},
        )
    return value, object_id
